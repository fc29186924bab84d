// The tokens a merge layer keeps (encoder.cpp: every token but the pairs' sources, in their order)
// for one CUDA block a sample (kept_tokens.cu): each token's place among the kept, written once for
// the device kernel and for the CPU (kept_on_host), which the tests check against the torch ops
// (an arange, a clone, a fill, a scatter-add and a sort). Header-only, no torch.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace htm::keeping {

/// The most tokens a sample may have for the kernel (a flag each in shared memory).
constexpr int64_t kMaxTokens = 1024;

/// Token t's place among the kept (the flags: 1 kept, 0 a source), written to keep if kept.
HTM_HD inline void place(const int32_t* flags, int64_t t, int64_t* keep) {
  if (!flags[t]) return;
  int64_t before = 0;
  for (int64_t u = 0; u < t; ++u) before += flags[u];
  keep[before] = t;
}

/// B samples on the host: keep (B×(T−r)) from src (B×r); flags: T slots of scratch.
inline void kept_on_host(const int64_t* src, int64_t B, int64_t T, int64_t r, int64_t* keep, int32_t* flags) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) flags[t] = 1;
    for (int64_t k = 0; k < r; ++k) flags[src[b * r + k]] = 0;
    for (int64_t t = 0; t < T; ++t) place(flags, t, keep + b * (T - r));
  }
}

}  // namespace htm::keeping
