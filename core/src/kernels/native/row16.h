// One row of at most 16 floats in an AVX-512 register: the softmax row kernels
// (softmax_rows.h) for a row that fits one register, without the trip through memory, and the
// exp they share. The same instructions in the same order as softmax_rows.cpp's loops, so the
// same bits (attention_small.cpp keeps a small head's rows in registers with them).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace htm {

#define HTM_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq")))

// A Cephes-style expf: range reduction by ln 2 and a degree-6 polynomial, relative error ~2e-7.
HTM_AVX512 inline __m512 exp_avx512(__m512 v) {
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_fmadd_ps(v, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 r =
      _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), v));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, k);  // p · 2^k
}

HTM_AVX512 inline __mmask16 row16_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

/// x ← softmax(x) over lanes k (the rest 0); returns the log-sum-exp.
HTM_AVX512 inline float softmax16(__m512& x, __mmask16 k) {
  const float m = _mm512_reduce_max_ps(_mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), k, x));
  const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_mov_ps(k, x), _mm512_set1_ps(m)));
  const float sum = _mm512_reduce_add_ps(_mm512_maskz_mov_ps(k, e));
  x = _mm512_mul_ps(_mm512_maskz_mov_ps(k, e), _mm512_set1_ps(1.0f / sum));
  return m + std::log(sum);
}

/// exp(x − shift) over lanes k (the rest 0).
HTM_AVX512 inline __m512 exp16(__m512 x, __mmask16 k, float shift) {
  return _mm512_maskz_mov_ps(k, exp_avx512(_mm512_sub_ps(_mm512_maskz_mov_ps(k, x), _mm512_set1_ps(shift))));
}

/// p ∘ (dp − Σ p∘dp) over lanes k (the rest 0): the gradient through a softmax row.
HTM_AVX512 inline __m512 softmax_grad16(__m512 p, __m512 dp, __mmask16 k) {
  p = _mm512_maskz_mov_ps(k, p), dp = _mm512_maskz_mov_ps(k, dp);
  const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_fmadd_ps(p, dp, _mm512_setzero_ps())));
  return _mm512_maskz_mov_ps(k, _mm512_mul_ps(p, _mm512_sub_ps(dp, dot)));
}

}  // namespace htm
