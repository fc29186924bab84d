// Row kernels of the fused attention (softmax_rows.h). exp is a Cephes-style expf: range
// reduction by ln 2 and a degree-6 polynomial, relative error ~2e-7.
#include "kernels/native/softmax_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/counter_rng.h"
#include "kernels/native/gemm.h"
#include "kernels/native/row16.h"

namespace htm {
namespace {

float exp_scalar(float v) {
  v = v < -87.0f ? -87.0f : (v > 88.0f ? 88.0f : v);
  const float k = std::floor(v * 1.44269504088896341f + 0.5f);
  const float r = v - k * 0.693359375f + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

HTM_AVX512 float softmax_avx512(float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16)
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), row16_lanes(n - i), x + i));
  const float m = _mm512_reduce_max_ps(vmax);
  const __m512 shift = _mm512_set1_ps(m);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = row16_lanes(n - i);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), shift));
    _mm512_mask_storeu_ps(x + i, k, e);
    vsum = _mm512_mask_add_ps(vsum, k, vsum, e);
  }
  const float sum = _mm512_reduce_add_ps(vsum);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = row16_lanes(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
  return m + std::log(sum);
}

HTM_AVX512 void exp_avx512_row(float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = row16_lanes(n - i);
    _mm512_mask_storeu_ps(x + i, k, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), s)));
  }
}

// 8 SplitMix64 draws at once: counters base + 4·lane + 32·step, the scalar loop's in its order.
HTM_AVX512 __m512i splitmix_avx512(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x9e3779b97f4a7c15ULL)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                         _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ULL)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                         _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebULL)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

HTM_AVX512 void mask_avx512(float* w, int64_t n, uint64_t base, uint32_t threshold, float scale) {
  // Each 64-bit draw covers 4 entries, 16 bits each, low bits first: 8 draws are 32 entries.
  const __m512i lanes = _mm512_set_epi64(28, 24, 20, 16, 12, 8, 4, 0);
  const __m512i thr = _mm512_set1_epi16(static_cast<int16_t>(threshold > 0xffff ? 0xffff : threshold));
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < n; j += 32) {
    const __m512i bits = splitmix_avx512(_mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(base + j)), lanes));
    __mmask32 keep = _mm512_cmpge_epu16_mask(bits, thr);
    if (threshold > 0xffff) keep = 0;
    const __mmask16 k0 = row16_lanes(n - j), k1 = n - j > 16 ? row16_lanes(n - j - 16) : 0;
    _mm512_mask_storeu_ps(w + j, k0,
                          _mm512_maskz_mul_ps(static_cast<__mmask16>(keep), _mm512_maskz_loadu_ps(k0, w + j), s));
    if (k1)
      _mm512_mask_storeu_ps(
          w + j + 16, k1,
          _mm512_maskz_mul_ps(static_cast<__mmask16>(keep >> 16), _mm512_maskz_loadu_ps(k1, w + j + 16), s));
  }
}

HTM_AVX512 void softmax_grad_avx512(const float* p, float* dp, int64_t n) {
  __m512 vdot = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = row16_lanes(n - i);
    vdot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_maskz_loadu_ps(k, dp + i), vdot);
  }
  const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(vdot));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = row16_lanes(n - i);
    _mm512_mask_storeu_ps(
        dp + i, k,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + i), dot)));
  }
}

bool has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return avx512_allowed() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq");
  }();
  return has;
}

}  // namespace

bool rows_avx512() { return has_avx512(); }

float softmax_row(float* x, int64_t n) {
  if (has_avx512()) return softmax_avx512(x, n);
  const float m = *std::max_element(x, x + n);
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (x[j] = exp_scalar(x[j] - m));
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) x[j] *= inv;
  return m + std::log(sum);
}

void exp_row(float* x, int64_t n, float shift) {
  if (has_avx512()) return exp_avx512_row(x, n, shift);
  for (int64_t j = 0; j < n; ++j) x[j] = exp_scalar(x[j] - shift);
}

void mask_row(float* w, int64_t n, uint64_t seed, uint64_t row, uint32_t threshold, float scale) {
  const uint64_t base = counter_bits(seed, row);
  if (has_avx512()) return mask_avx512(w, n, base, threshold, scale);
  for (int64_t j = 0; j < n; j += 4) {
    const uint64_t bits = splitmix64(base + static_cast<uint64_t>(j));
    for (int64_t t = 0; t < 4 && j + t < n; ++t) w[j + t] *= ((bits >> (16 * t)) & 0xffff) >= threshold ? scale : 0.0f;
  }
}

void softmax_grad_row(const float* p, float* dp, int64_t n) {
  if (has_avx512()) return softmax_grad_avx512(p, dp, n);
  float dot = 0;
  for (int64_t j = 0; j < n; ++j) dot += p[j] * dp[j];
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dot);
}

}  // namespace htm
