// Narrow rows' layer norm in AVX-512 registers (layer_norm.h): a row is at most four registers,
// its channels beyond C masked to zero; the weight and bias gradients collect in registers over
// the rows and are stored once.
#include "kernels/native/layer_norm.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/native/row16.h"
#include "kernels/native/softmax_rows.h"

namespace htm {
namespace {

constexpr int kMaxChunks = 4;  // 64 channels

// The channels of chunk k (of 16) that a row of C has.
HTM_AVX512 inline __mmask16 chunk_mask(int64_t C, int k) { return row16_lanes(C - 16 * k); }

// A per-channel vector (w, b) as registers, `fill` where absent.
HTM_AVX512 void load_channels(const float* p, int64_t C, int chunks, float fill, __m512* out) {
  for (int k = 0; k < chunks; ++k)
    out[k] =
        p != nullptr ? _mm512_mask_loadu_ps(_mm512_set1_ps(fill), chunk_mask(C, k), p + 16 * k) : _mm512_set1_ps(fill);
}

HTM_AVX512 void forward_avx512(const float* x, int64_t rows, int64_t C, const float* w, const float* b, float eps,
                               float* out, float* mean, float* rstd) {
  const int chunks = static_cast<int>((C + 15) / 16);
  __m512 wv[kMaxChunks], bv[kMaxChunks];
  load_channels(w, C, chunks, 1.0f, wv);
  load_channels(b, C, chunks, 0.0f, bv);
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    __m512 v[kMaxChunks], sum = _mm512_setzero_ps();
    for (int k = 0; k < chunks; ++k)
      sum = _mm512_add_ps(sum, v[k] = _mm512_maskz_loadu_ps(chunk_mask(C, k), xr + 16 * k));
    const float m = _mm512_reduce_add_ps(sum) * inv_c;
    __m512 squares = _mm512_setzero_ps();
    for (int k = 0; k < chunks; ++k) {
      v[k] = _mm512_maskz_sub_ps(chunk_mask(C, k), v[k], _mm512_set1_ps(m));
      squares = _mm512_fmadd_ps(v[k], v[k], squares);
    }
    const float s = 1.0f / std::sqrt(_mm512_reduce_add_ps(squares) * inv_c + eps);
    mean[r] = m, rstd[r] = s;
    for (int k = 0; k < chunks; ++k)
      _mm512_mask_storeu_ps(out + r * C + 16 * k, chunk_mask(C, k),
                            _mm512_fmadd_ps(_mm512_mul_ps(v[k], _mm512_set1_ps(s)), wv[k], bv[k]));
  }
}

HTM_AVX512 void backward_avx512(const float* dn, const float* x, const float* mean, const float* rstd, const float* w,
                                int64_t rows, int64_t C, float* dx, float* dw, float* db) {
  const int chunks = static_cast<int>((C + 15) / 16);
  __m512 wv[kMaxChunks], dwv[kMaxChunks], dbv[kMaxChunks];
  load_channels(w, C, chunks, 1.0f, wv);
  for (int k = 0; k < chunks; ++k) dwv[k] = dbv[k] = _mm512_setzero_ps();
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int64_t r = 0; r < rows; ++r) {
    const float *dr = dn + r * C, *xr = x + r * C;
    const __m512 m = _mm512_set1_ps(mean[r]), s = _mm512_set1_ps(rstd[r]);
    __m512 xhat[kMaxChunks], g[kMaxChunks], sum_g = _mm512_setzero_ps(), sum_gx = _mm512_setzero_ps();
    for (int k = 0; k < chunks; ++k) {
      const __mmask16 mk = chunk_mask(C, k);
      const __m512 d = _mm512_maskz_loadu_ps(mk, dr + 16 * k);
      xhat[k] = _mm512_maskz_mul_ps(mk, _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, xr + 16 * k), m), s);
      dwv[k] = _mm512_fmadd_ps(d, xhat[k], dwv[k]);
      dbv[k] = _mm512_add_ps(dbv[k], d);
      g[k] = _mm512_mul_ps(d, wv[k]);
      sum_g = _mm512_add_ps(sum_g, g[k]);
      sum_gx = _mm512_fmadd_ps(g[k], xhat[k], sum_gx);
    }
    if (dx == nullptr) continue;
    // dx = rstd · (g − mean(g) − x̂ · mean(g·x̂))
    const __m512 mg = _mm512_set1_ps(_mm512_reduce_add_ps(sum_g) * inv_c);
    const __m512 mgx = _mm512_set1_ps(_mm512_reduce_add_ps(sum_gx) * inv_c);
    for (int k = 0; k < chunks; ++k)
      _mm512_mask_storeu_ps(dx + r * C + 16 * k, chunk_mask(C, k),
                            _mm512_mul_ps(s, _mm512_sub_ps(_mm512_sub_ps(g[k], mg), _mm512_mul_ps(xhat[k], mgx))));
  }
  for (int k = 0; k < chunks; ++k) {
    if (dw != nullptr) _mm512_mask_storeu_ps(dw + 16 * k, chunk_mask(C, k), dwv[k]);
    if (db != nullptr) _mm512_mask_storeu_ps(db + 16 * k, chunk_mask(C, k), dbv[k]);
  }
}

}  // namespace

bool narrow_norm(int64_t C) { return C >= 1 && C <= 16 * kMaxChunks && rows_avx512(); }

void layer_norm_rows(const float* x, int64_t rows, int64_t C, const float* w, const float* b, float eps, float* out,
                     float* mean, float* rstd) {
  forward_avx512(x, rows, C, w, b, eps, out, mean, rstd);
}

void layer_norm_backward_rows(const float* dn, const float* x, const float* mean, const float* rstd, const float* w,
                              int64_t rows, int64_t C, float* dx, float* dw, float* db) {
  backward_avx512(dn, x, mean, rstd, w, rows, C, dx, dw, db);
}

}  // namespace htm
