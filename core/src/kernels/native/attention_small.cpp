// Small attention heads in AVX-512 registers (attention_small.h). Keys and values are held
// transposed (a register per channel, a lane per key) for the score rows and dP = dO Vᵀ, and as
// rows (a register per key, a lane per channel) for P·V and dS·K; dK and dV collect transposed
// and are added to their rows once per head.
#include "kernels/native/attention_small.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/native/row16.h"
#include "kernels/native/softmax_rows.h"

namespace htm {
namespace {

// A head's keys or values: by channel (c: lane j = row j's channel c) and by row.
struct Held {
  __m512 by_channel[16];
  __m512 by_row[16];
};

// Up to 16 rows of x (rows ld apart, d channels) by channel: lane l of out[c] = row l's channel c
// (0 past `rows`).
HTM_AVX512 inline void by_channel(const float* x, int64_t ld, int64_t rows, int64_t d, __m512* out) {
  alignas(64) float t[16][16];
  for (int64_t l = 0; l < 16; ++l)
    for (int64_t c = 0; c < d; ++c) t[c][l] = l < rows ? x[l * ld + c] : 0.0f;
  for (int64_t c = 0; c < d; ++c) out[c] = _mm512_load_ps(t[c]);
}

HTM_AVX512 void hold(const float* x, int64_t ld, int64_t rows, int64_t d, Held& out) {
  const __mmask16 dm = row16_lanes(d);
  for (int64_t j = 0; j < rows; ++j) out.by_row[j] = _mm512_maskz_loadu_ps(dm, x + j * ld);
  by_channel(x, ld, rows, d, out.by_channel);
}

// Σ_i s[i·stride] · v[i] over n registers, in two running sums (every caller the same order: a
// lane's sum is the same whichever side, the scalar or the register, holds its row).
HTM_AVX512 inline __m512 scaled_sum(const float* s, const __m512* v, int64_t n, int64_t stride = 1) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(s[i * stride]), v[i], acc0);
    acc1 = _mm512_fmadd_ps(_mm512_set1_ps(s[(i + 1) * stride]), v[i + 1], acc1);
  }
  if (i < n) acc0 = _mm512_fmadd_ps(_mm512_set1_ps(s[i * stride]), v[i], acc0);
  return _mm512_add_ps(acc0, acc1);
}

// Σ_c x[c] · held.by_channel[c], times alpha: a row over the keys.
HTM_AVX512 inline __m512 row_against(const float* x, const Held& held, int64_t d, float alpha) {
  return _mm512_mul_ps(scaled_sum(x, held.by_channel, d), _mm512_set1_ps(alpha));
}

// Σ_j w[j] · held.by_row[j]: a row over the channels.
HTM_AVX512 inline __m512 weighted_rows(const float* w, const Held& held, int64_t tk) {
  return scaled_sum(w, held.by_row, tk);
}

HTM_AVX512 void forward_avx512(const SmallHead& h, const SmallDropout& drop, float* out, int64_t ld_out, float* lse) {
  Held keys, values;
  hold(h.k, h.ld_k, h.tk, h.d, keys);
  hold(h.v, h.ld_v, h.tk, h.d, values);
  const float alpha = 1.0f / std::sqrt(static_cast<float>(h.d));
  const __mmask16 dm = row16_lanes(h.d), km = row16_lanes(h.tk);
  alignas(64) float w[16];
  for (int64_t r = 0; r < h.tq; ++r) {
    __m512 row = row_against(h.q + r * h.ld_q, keys, h.d, alpha);
    lse[r] = softmax16(row, km);
    _mm512_store_ps(w, row);
    if (drop.on) mask_row(w, h.tk, drop.seed, drop.first + r, drop.threshold, drop.scale);
    _mm512_mask_storeu_ps(out + r * ld_out, dm, weighted_rows(w, values, h.tk));
  }
}

// _mm512_reduce_max_ps and _mm512_reduce_add_ps (GCC's avx512fintrin.h: halves, quarters, then
// lanes 0+2 and 1+3, then those two) across 16 registers, lane by lane: each lane's result is
// the reduction of its 16 values in the order the one-register reduction takes them.
HTM_AVX512 inline __m512 combine(__m512 x, __m512 y, bool max) {
  return max ? _mm512_max_ps(x, y) : _mm512_add_ps(x, y);
}

HTM_AVX512 inline __m512 reduce_across(const __m512* x, bool max) {
  __m512 t3[8], t6[4];
  for (int i = 0; i < 8; ++i) t3[i] = combine(x[8 + i], x[i], max);
  for (int i = 0; i < 4; ++i) t6[i] = combine(t3[4 + i], t3[i], max);
  return combine(combine(t6[0], t6[2], max), combine(t6[1], t6[3], max), max);
}

// Adds x (by channel: lane j of x[c] = key j's channel c) onto the rows of out (ld apart), keys
// 0..tk-1, d channels: dK and dV, once a head's rows are all in.
HTM_AVX512 inline void add_by_key(const __m512* x, int64_t tk, int64_t d, float* out, int64_t ld) {
  alignas(64) float t[16][16];
  for (int64_t c = 0; c < d; ++c) _mm512_store_ps(t[c], x[c]);
  for (int64_t j = 0; j < tk; ++j)
    for (int64_t c = 0; c < d; ++c) out[j * ld + c] += t[c][j];
}

// forward_avx512 without dropout for up to 16 query rows at once, a lane per row: the scores,
// softmax and weighted values as forward_avx512 computes each row (the same fused multiply-adds
// in the same two running sums, the same reduction trees, lane by lane), so the same bits, where
// the row kernel reduces each row across its lanes twice.
HTM_AVX512 void forward_by_queries(const SmallHead& h, float* out, int64_t ld_out, float* lse) {
  const float alpha = 1.0f / std::sqrt(static_cast<float>(h.d));
  const __m512 a = _mm512_set1_ps(alpha);
  alignas(64) float t[16][16];
  for (int64_t r0 = 0; r0 < h.tq; r0 += 16) {
    const int64_t rows = std::min<int64_t>(16, h.tq - r0);
    __m512 q[16];  // Q by channel: lane l = row r0 + l
    by_channel(h.q + r0 * h.ld_q, h.ld_q, rows, h.d, q);
    __m512 s[16];  // s[j]: the rows' scaled scores against key j
    for (int64_t j = 0; j < 16; ++j) {
      if (j >= h.tk) {
        s[j] = _mm512_set1_ps(-INFINITY);
        continue;
      }
      s[j] = _mm512_mul_ps(scaled_sum(h.k + j * h.ld_k, q, h.d), a);  // row_against, a lane per row
    }
    const __m512 m = reduce_across(s, /*max=*/true);
    __m512 e[16];
    for (int64_t j = 0; j < 16; ++j) e[j] = j < h.tk ? exp_avx512(_mm512_sub_ps(s[j], m)) : _mm512_setzero_ps();
    const __m512 sum = reduce_across(e, /*max=*/false);
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
    for (int64_t j = 0; j < h.tk; ++j) e[j] = _mm512_mul_ps(e[j], inv);  // the weights
    alignas(64) float ms[16], sums[16];
    _mm512_store_ps(ms, m);
    _mm512_store_ps(sums, sum);
    for (int64_t l = 0; l < rows; ++l) lse[r0 + l] = ms[l] + std::log(sums[l]);
    for (int64_t c = 0; c < h.d; ++c)  // weighted_rows, a lane per row: Σ_j w_j · v[j][c]
      _mm512_store_ps(t[c], scaled_sum(h.v + c, e, h.tk, h.ld_v));
    for (int64_t l = 0; l < rows; ++l)
      for (int64_t c = 0; c < h.d; ++c) out[(r0 + l) * ld_out + c] = t[c][l];
  }
}

HTM_AVX512 void backward_avx512(const SmallHead& h, const SmallDropout& drop, const float* g, int64_t ld_g,
                                const float* lse, float* dq, int64_t ld_dq, float* dk, float* dv, int64_t ld_dkv) {
  Held keys, values;
  hold(h.k, h.ld_k, h.tk, h.d, keys);
  hold(h.v, h.ld_v, h.tk, h.d, values);
  const float alpha = 1.0f / std::sqrt(static_cast<float>(h.d));
  const __mmask16 dm = row16_lanes(h.d), km = row16_lanes(h.tk);
  __m512 dk_t[16], dv_t[16];  // by channel: lane j = key j
  for (int64_t c = 0; c < h.d; ++c) dk_t[c] = dv_t[c] = _mm512_setzero_ps();
  alignas(64) float p[16], dp[16];
  for (int64_t r = 0; r < h.tq; ++r) {
    const float *qr = h.q + r * h.ld_q, *gr = g + r * ld_g;
    __m512 pv = exp16(row_against(qr, keys, h.d, alpha), km, lse[r]);  // P, from the saved log-sum-exp
    __m512 dpv = row_against(gr, values, h.d, 1.0f);                   // dP̃ = dO Vᵀ
    if (drop.on) {
      _mm512_store_ps(dp, dpv);
      mask_row(dp, h.tk, drop.seed, drop.first + r, drop.threshold, drop.scale);
      dpv = _mm512_load_ps(dp);
    }
    dpv = softmax_grad16(pv, dpv, km);  // dS
    if (drop.on) {                      // P̃ for dV
      _mm512_store_ps(p, pv);
      mask_row(p, h.tk, drop.seed, drop.first + r, drop.threshold, drop.scale);
      pv = _mm512_load_ps(p);
    }
    const __m512 ds = _mm512_mul_ps(dpv, _mm512_set1_ps(alpha));
    for (int64_t c = 0; c < h.d; ++c) {
      dv_t[c] = _mm512_fmadd_ps(_mm512_set1_ps(gr[c]), pv, dv_t[c]);
      dk_t[c] = _mm512_fmadd_ps(_mm512_set1_ps(qr[c]), ds, dk_t[c]);
    }
    _mm512_store_ps(dp, ds);
    float* dqr = dq + r * ld_dq;
    _mm512_mask_storeu_ps(dqr, dm, _mm512_add_ps(_mm512_maskz_loadu_ps(dm, dqr), weighted_rows(dp, keys, h.tk)));
  }
  add_by_key(dk_t, h.tk, h.d, dk, ld_dkv);
  add_by_key(dv_t, h.tk, h.d, dv, ld_dkv);
}

// A 16×16 block of floats transposed in registers: lane l of r[i] becomes lane i of r[l].
HTM_AVX512 inline void transpose16(__m512* r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // 4-lane blocks: a column of four rows each
    u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      t[8 * i + k] = _mm512_shuffle_f32x4(u[8 * i + k], u[8 * i + 4 + k], 0x88);
      t[8 * i + 4 + k] = _mm512_shuffle_f32x4(u[8 * i + k], u[8 * i + 4 + k], 0xdd);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
  }
}

// x rounded to floats where it stands: GCC fuses a product with the one sum that alone uses it
// (one rounding fewer), which the row kernels' masked moves between the two prevent.
HTM_AVX512 inline __m512 rounded(__m512 x) {
  asm("" : "+v"(x));
  return x;
}

// backward_avx512 without dropout for up to 16 query rows at once, a lane per row (as
// forward_by_queries): P, dP̃ and dS a register per key; the softmax gradient's Σ P∘dP̃ replays
// _mm512_reduce_add_ps lane by lane; dK and dV collect from P and dS transposed (a register per
// row, a lane per key), row after row as the row kernel adds them; dQ as weighted_rows sums, a lane
// per row. The same operations in the same order, so the same bits, without a reduction across
// lanes per row.
HTM_AVX512 void backward_by_queries(const SmallHead& h, const float* g, int64_t ld_g, const float* lse, float* dq,
                                    int64_t ld_dq, float* dk, float* dv, int64_t ld_dkv) {
  const __m512 a = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(h.d))), one = _mm512_set1_ps(1.0f),
               zero = _mm512_setzero_ps();
  __m512 dk_t[16], dv_t[16];  // by channel: lane j = key j
  for (int64_t c = 0; c < h.d; ++c) dk_t[c] = dv_t[c] = zero;
  alignas(64) float t[16][16];
  for (int64_t r0 = 0; r0 < h.tq; r0 += 16) {
    const int64_t rows = std::min<int64_t>(16, h.tq - r0);
    __m512 q[16], go[16], p[16], ds[16];
    by_channel(h.q + r0 * h.ld_q, h.ld_q, rows, h.d, q);
    by_channel(g + r0 * ld_g, ld_g, rows, h.d, go);
    const __m512 shift = _mm512_maskz_loadu_ps(row16_lanes(rows), lse + r0);
    for (int64_t j = 0; j < 16; ++j) {
      if (j >= h.tk) {
        p[j] = ds[j] = zero;
        continue;
      }
      p[j] = exp_avx512(_mm512_sub_ps(rounded(_mm512_mul_ps(scaled_sum(h.k + j * h.ld_k, q, h.d), a)), shift));
      ds[j] = rounded(_mm512_mul_ps(scaled_sum(h.v + j * h.ld_v, go, h.d), one));  // dP̃ = dO Vᵀ, as row_against
    }
    __m512 products[16];
    for (int64_t j = 0; j < 16; ++j) products[j] = _mm512_fmadd_ps(p[j], ds[j], zero);
    const __m512 dot = reduce_across(products, /*max=*/false);
    for (int64_t j = 0; j < h.tk; ++j) ds[j] = _mm512_mul_ps(_mm512_mul_ps(p[j], _mm512_sub_ps(ds[j], dot)), a);
    for (int64_t c = 0; c < h.d; ++c)  // weighted_rows, a lane per row: Σ_j dS_j · k[j][c]
      _mm512_store_ps(t[c], scaled_sum(h.k + c, ds, h.tk, h.ld_k));
    for (int64_t l = 0; l < rows; ++l)
      for (int64_t c = 0; c < h.d; ++c) dq[(r0 + l) * ld_dq + c] += t[c][l];
    transpose16(p);  // p[r]: row r0 + r's weights, a lane per key
    transpose16(ds);
    for (int64_t l = 0; l < rows; ++l) {
      const float *qr = h.q + (r0 + l) * h.ld_q, *gr = g + (r0 + l) * ld_g;
      for (int64_t c = 0; c < h.d; ++c) {
        dv_t[c] = _mm512_fmadd_ps(_mm512_set1_ps(gr[c]), p[l], dv_t[c]);
        dk_t[c] = _mm512_fmadd_ps(_mm512_set1_ps(qr[c]), ds[l], dk_t[c]);
      }
    }
  }
  add_by_key(dk_t, h.tk, h.d, dk, ld_dkv);
  add_by_key(dv_t, h.tk, h.d, dv, ld_dkv);
}

}  // namespace

bool small_heads_fit(int64_t d, int64_t tk) { return d >= 1 && d <= 16 && tk >= 1 && tk <= 16 && rows_avx512(); }

void small_head_forward(const SmallHead& h, const SmallDropout& drop, float* out, int64_t ld_out, float* lse) {
  if (drop.on)
    forward_avx512(h, drop, out, ld_out, lse);
  else
    forward_by_queries(h, out, ld_out, lse);
}

void small_head_backward(const SmallHead& h, const SmallDropout& drop, const float* g, int64_t ld_g, const float* lse,
                         float* dq, int64_t ld_dq, float* dk, float* dv, int64_t ld_dkv) {
  // A lane per query gains where a row is short (d = 4: 1.3x a head of 16 queries and keys, one
  // thread, AMD EPYC); at d = 16 it spills registers and takes longer than the row kernel.
  if (!drop.on && h.d <= 8)
    backward_by_queries(h, g, ld_g, lse, dq, ld_dq, dk, dv, ld_dkv);
  else
    backward_avx512(h, drop, g, ld_g, lse, dq, ld_dq, dk, dv, ld_dkv);
}

}  // namespace htm
