// The point-set loss's exact assignment (gpu::min_cost_assignment) for one CUDA block a sample
// (set_assignment.cu): the dynamic programme's step for one set of targets, written once for the
// device kernel and for the CPU (assign_on_host: the same steps, one set after another, which is
// how min_cost_assignment takes a CPU tensor), checked by the tests against its layers in torch ops. Header-only, no
// torch: nvcc compiles it without torch's headers.
//
// f(S), for a set S of k targets (a bit mask), is the least cost of assigning predictions
// 0 … k−1 to S: f(∅) = 0 and f(S) = min over j in S of f(S∖{j}) + cost[k−1][j], the members j
// taken in increasing order and the first least kept, with torch's rule for NaN (a NaN is least
// and ends the search). Every set of k members needs only sets of k − 1: a layer of sets a
// barrier. Back from the whole set, the member each set took last is prediction k − 1's target.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace htm::assignment {

/// The most elements a set may have (f and the choices are 2^N slots a sample).
constexpr int64_t kMaxElements = 16;

/// Whether `value` replaces `least` as the minimum so far, as torch's min over a dimension
/// decides on the CPU: strictly less, or a NaN (after which nothing replaces it).
HTM_HD inline bool replaces(double value, double least) {
  if (least != least) return false;  // a NaN: the search has ended
  return !(value >= least);          // less, or a NaN
}

/// The number of set bits (a mask of N ≤ 16 bits).
HTM_HD inline int64_t members(int64_t mask) {
#if defined(__CUDA_ARCH__)
  return __popcll(static_cast<unsigned long long>(mask));
#else
  return __builtin_popcountll(static_cast<unsigned long long>(mask));
#endif
}

/// The lowest set bit's index (a mask other than 0).
HTM_HD inline int64_t lowest(int64_t mask) {
#if defined(__CUDA_ARCH__)
  return __ffsll(static_cast<long long>(mask)) - 1;
#else
  return __builtin_ctzll(static_cast<unsigned long long>(mask));
#endif
}

/// f(mask) and the member it took last, for a set of k = popcount(mask) ≥ 1 members, from the
/// sets of k − 1 (f: 2^N slots, those of k − 1 members filled). cost: N×N, prediction-major.
HTM_HD inline void solve_set(const double* cost, int64_t N, int64_t mask, int64_t k, double* f, uint8_t* choice) {
  const double* row = cost + (k - 1) * N;
  int64_t taken = lowest(mask);
  double least = f[mask ^ (int64_t{1} << taken)] + row[taken];
  for (int64_t rest = mask & (mask - 1); rest != 0; rest &= rest - 1) {  // the other members, in increasing order
    const int64_t j = lowest(rest);
    const double value = f[mask ^ (int64_t{1} << j)] + row[j];
    if (replaces(value, least)) least = value, taken = j;
  }
  f[mask] = least;
  choice[mask] = static_cast<uint8_t>(taken);
}

/// Prediction i's target for every i (out: N), back from the whole set through the choices.
HTM_HD inline void trace_back(const uint8_t* choice, int64_t N, int64_t* out) {
  int64_t mask = (int64_t{1} << N) - 1;
  for (int64_t k = N; k >= 1; --k) {
    const int64_t j = choice[mask];
    out[k - 1] = j;
    mask ^= int64_t{1} << j;
  }
}

/// The whole assignment of B samples on the host, with the kernel's steps (set_assignment.cu):
/// the sets in increasing order of their masks, which one thread may take (a set's subsets are
/// smaller numbers), where the kernel's threads go a layer of sets at a time; each set's minimum is
/// the same either way. gpu::min_cost_assignment's path for CPU tensors, and the tests'. cost:
/// B×N×N; out: B×N; f: 2^N doubles and choice: 2^N bytes of scratch.
inline void assign_on_host(const double* cost, int64_t B, int64_t N, int64_t* out, double* f, uint8_t* choice) {
  const int64_t sets = int64_t{1} << N;
  for (int64_t b = 0; b < B; ++b) {
    f[0] = 0;
    for (int64_t mask = 1; mask < sets; ++mask) solve_set(cost + b * N * N, N, mask, members(mask), f, choice);
    trace_back(choice, N, out + b * N);
  }
}

}  // namespace htm::assignment
