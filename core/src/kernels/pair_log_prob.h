// The pair sampler's exact sequential log-probability (sampling.cpp's pair_log_prob, form "exact")
// for one CUDA block a sample (pair_log_prob.cu): each part written once for the device kernels and
// for the CPU (log_prob_on_host, grad_on_host: the same parts one after another), where the tests
// check them against the torch ops. Header-only, no torch: nvcc compiles it without torch's headers.
//
// Draw k of r takes the pair (src_k, dst_k) among the tokens still unused with probability
// exp(m_sd) / Z_k, Z_k = Σ over ordered pairs (i, j), i ≠ j, both unused at draw k, of exp(m_ij),
// m the logits with the diagonal at −∞. A token taken by draw t is unused at draws k ≤ t, so the
// pair (i, j) counts in Z_k for k ≤ level(i, j) = min(taken(i), taken(j)) (taken = r: never). With
// H[l] the sum of exp(m_ij − top) over the pairs at level l — for l < r the pairs of draw l's two
// tokens with the tokens still unused then, O(T) each; for l = r the pairs of never-taken tokens —
// Z_k = Σ_{l ≥ k} H[l]: O(T²) a sample where the torch ops take O(r·T²). The gradient of
// log p_k = m_{src_k dst_k} − log Z_k − top with respect to m_ij is [(i, j) drawn at k] −
// exp(m_ij − top)·Σ_{k ≤ level(i, j)} 1/Z_k: one prefix sum a sample, then a value an element.
// As the torch ops: top the largest logit (NaN if one is), exp(m − top) in double from the float
// difference, Z clamped at 1e-300 (no gradient below it), log Z + top in double, then float.
// The entropy of the first draw's distribution (pair_entropy) likewise: with w = exp(m − top),
// Z = Σ w and A = Σ w·(m − top) over the pairs (0·(−∞) taken as 0), H = log Z − A/Z; its gradient
// −p_ij·(log p_ij + H), p = w/Z.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace htm::logprob {

/// The most tokens a sample may have for the kernels (the taken draws in shared memory).
constexpr int64_t kMaxTokens = 1024;

/// Z below this is clamped to it, as the torch ops clamp: its log is finite, its gradient 0.
constexpr double kLeastNormaliser = 1e-300;

/// The larger of two as torch's max decides: a NaN wins, and stays.
HTM_HD inline float larger(float a, float b) {
  if (a != a) return a;  // a NaN stays
  if (b != b) return b;  // a NaN wins
  return b > a ? b : a;
}

/// exp(m_ij − top) in double, from the float difference (the torch ops' rounding).
HTM_HD inline double weight(const float* m, int64_t T, int64_t i, int64_t j, float top) {
  return exp(static_cast<double>(m[i * T + j] - top));
}

/// Which draw took each token (r: none), from the sample's r pairs. taken: T slots, set to r first.
HTM_HD inline void mark_taken(const int64_t* src, const int64_t* dst, int64_t k, int32_t* taken) {
  taken[src[k]] = static_cast<int32_t>(k);
  taken[dst[k]] = static_cast<int32_t>(k);
}

/// H[l] for l < r, the share of u = lane, lane + lanes, ...: the pairs of draw l's tokens s, d
/// with the tokens u still unused at draw l (both orientations, (s, d) once).
HTM_HD inline double level_partial(const float* m, int64_t T, float top, const int32_t* taken, int64_t s, int64_t d,
                                   int64_t l, int64_t lane, int64_t lanes) {
  double sum = 0;
  for (int64_t u = lane; u < T; u += lanes) {
    if (taken[u] < l) continue;
    if (u != s) sum += weight(m, T, s, u, top) + weight(m, T, u, s, top);
    if (u != d && u != s) sum += weight(m, T, d, u, top) + weight(m, T, u, d, top);
  }
  return sum;
}

/// H[r], the share of flat = lane, lane + lanes, ... of the T² pairs: those of two never-taken tokens.
HTM_HD inline double rest_partial(const float* m, int64_t T, float top, const int32_t* taken, int64_t r, int64_t lane,
                                  int64_t lanes) {
  double sum = 0;
  for (int64_t flat = lane; flat < T * T; flat += lanes) {
    const int64_t i = flat / T, j = flat % T;
    if (i != j && taken[i] == r && taken[j] == r) sum += weight(m, T, i, j, top);
  }
  return sum;
}

/// Z_k = Σ_{l ≥ k} H[l] for every k < r, in place (H: r + 1 slots; H[k] becomes Z_k).
HTM_HD inline void suffix_sums(double* H, int64_t r) {
  double sum = H[r];
  for (int64_t k = r - 1; k >= 0; --k) H[k] = sum += H[k];
}

/// log p_k from the drawn pair's logit, Z_k and top.
HTM_HD inline float log_prob(float chosen, double Z, float top) {
  const double z = Z < kLeastNormaliser ? kLeastNormaliser : Z;
  return chosen - static_cast<float>(log(z) + static_cast<double>(top));
}

/// S[l] = Σ_{k ≤ min(l, r − 1)} g_k / Z_k over the Z at or above the clamp (S: r + 1 slots).
HTM_HD inline void prefix_sums(const float* g, const double* Z, int64_t r, double* S) {
  double sum = 0;
  for (int64_t k = 0; k < r; ++k) {
    if (Z[k] >= kLeastNormaliser) sum += static_cast<double>(g[k]) / Z[k];
    S[k] = sum;
  }
  S[r] = sum;
}

/// The normalisers' share of the gradient at flat = i·T + j (the drawn pairs' g_k added after).
HTM_HD inline float spread(const float* m, int64_t T, float top, const int32_t* taken, const double* S, int64_t flat) {
  const int64_t i = flat / T, j = flat % T;
  const int32_t level = taken[i] < taken[j] ? taken[i] : taken[j];
  return static_cast<float>(-(weight(m, T, i, j, top) * S[level]));
}

/// A share of the entropy's sums over flat = lane, lane + lanes, ...: Z (first) and A (second).
struct Sums {
  double z = 0, a = 0;
};

HTM_HD inline Sums entropy_partial(const float* m, int64_t T, float top, int64_t lane, int64_t lanes) {
  Sums sums;
  for (int64_t flat = lane; flat < T * T; flat += lanes) {
    const double w = weight(m, T, flat / T, flat % T, top);
    if (w != 0) sums.z += w, sums.a += w * static_cast<double>(m[flat] - top);  // a NaN stays
  }
  return sums;
}

/// H from the sums, in double.
HTM_HD inline double entropy_of(double z, double a) { return log(z) - a / z; }

/// dH/dm at flat, times g: −p·(log p + H), 0 where w is.
HTM_HD inline float entropy_spread(const float* m, int64_t T, float top, double z, double a, float g, int64_t flat) {
  const double w = weight(m, T, flat / T, flat % T, top);
  if (w == 0) return 0.0f;
  const double p = w / z, log_p = static_cast<double>(m[flat] - top) - log(z);
  return static_cast<float>(-(static_cast<double>(g) * p * (log_p + entropy_of(z, a))));
}

/// The forward pass of B samples on the host, the kernel's parts one after another (lanes: a
/// warp's, whose partial sums are added in lane order here). masked: B×T×T; src, dst: B×r; out,
/// Z: B×r; top: B; taken: T and H: r + 1 slots of scratch.
inline void log_prob_on_host(const float* masked, const int64_t* src, const int64_t* dst, int64_t B, int64_t T,
                             int64_t r, float* out, double* Z, float* top, int32_t* taken, double* H,
                             int64_t lanes = 32) {
  for (int64_t b = 0; b < B; ++b) {
    const float* m = masked + b * T * T;
    const int64_t *s = src + b * r, *d = dst + b * r;
    float t = -INFINITY;
    for (int64_t flat = 0; flat < T * T; ++flat) t = larger(t, m[flat]);
    for (int64_t u = 0; u < T; ++u) taken[u] = static_cast<int32_t>(r);
    for (int64_t k = 0; k < r; ++k) mark_taken(s, d, k, taken);
    for (int64_t l = 0; l < r; ++l) {
      H[l] = 0;
      for (int64_t lane = 0; lane < lanes; ++lane) H[l] += level_partial(m, T, t, taken, s[l], d[l], l, lane, lanes);
    }
    H[r] = rest_partial(m, T, t, taken, r, 0, 1);
    suffix_sums(H, r);
    for (int64_t k = 0; k < r; ++k) {
      Z[b * r + k] = H[k];
      out[b * r + k] = log_prob(m[s[k] * T + d[k]], H[k], t);
    }
    top[b] = t;
  }
}

/// The backward pass of B samples on the host: grad (B×T×T) from g (B×r) and the forward's Z and
/// top. taken: T and S: r + 1 slots of scratch.
inline void grad_on_host(const float* g, const float* masked, const int64_t* src, const int64_t* dst, const double* Z,
                         const float* top, int64_t B, int64_t T, int64_t r, float* grad, int32_t* taken, double* S) {
  for (int64_t b = 0; b < B; ++b) {
    const float* m = masked + b * T * T;
    const int64_t *s = src + b * r, *d = dst + b * r;
    for (int64_t u = 0; u < T; ++u) taken[u] = static_cast<int32_t>(r);
    for (int64_t k = 0; k < r; ++k) mark_taken(s, d, k, taken);
    prefix_sums(g + b * r, Z + b * r, r, S);
    for (int64_t flat = 0; flat < T * T; ++flat) grad[b * T * T + flat] = spread(m, T, top[b], taken, S, flat);
    for (int64_t k = 0; k < r; ++k) grad[b * T * T + s[k] * T + d[k]] += g[b * r + k];
  }
}

/// The entropy of B samples on the host, the kernel's parts one after another: H (B float) and
/// the sums backward needs (B×2 double: Z, A) and top (B) from masked (B×T×T).
inline void entropy_on_host(const float* masked, int64_t B, int64_t T, float* H, double* sums, float* top) {
  for (int64_t b = 0; b < B; ++b) {
    const float* m = masked + b * T * T;
    float t = -INFINITY;
    for (int64_t flat = 0; flat < T * T; ++flat) t = larger(t, m[flat]);
    const Sums s = entropy_partial(m, T, t, 0, 1);
    sums[2 * b] = s.z, sums[2 * b + 1] = s.a, top[b] = t;
    H[b] = static_cast<float>(entropy_of(s.z, s.a));
  }
}

/// The entropy's gradient on the host: grad (B×T×T) from g (B) and the forward's sums and top.
inline void entropy_grad_on_host(const float* g, const float* masked, const double* sums, const float* top, int64_t B,
                                 int64_t T, float* grad) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t flat = 0; flat < T * T; ++flat)
      grad[b * T * T + flat] = entropy_spread(masked + b * T * T, T, top[b], sums[2 * b], sums[2 * b + 1], g[b], flat);
}

}  // namespace htm::logprob
