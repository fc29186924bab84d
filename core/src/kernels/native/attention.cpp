// The native fused multi-head attention for CPUs: softmax(QKᵀ/√d) V computed block by block, so the
// B×h×Tq×Tk weights never exist in memory; backward recomputes them from the saved
// log-sum-exp (the FlashAttention scheme). Dropout on the weights uses a counter-based mask
// that forward and backward regenerate identically. Under runtime.precision = "bf16" q, k, v
// (and the gradient) are rounded to bf16 once and the weight blocks as they are formed; the
// softmax, its log-sum-exp and every accumulation stay fp32.
#include <cmath>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/native/attention_small.h"
#include "kernels/native/gemm.h"
#include "kernels/native/native.h"
#include "kernels/native/softmax_rows.h"
#include "kernels/precision.h"

namespace htm {
namespace {

// Query rows per block: a rows×Tk block of scores (~64 KB) stays in cache, and short key
// sets get tall blocks so each BLAS call has work enough to amortise its overhead.
int64_t block_rows(int64_t tk) { return std::max<int64_t>(64, 16384 / std::max<int64_t>(1, tk)); }

struct Shapes {
  int64_t B, Bq, Tq, Tk, C, h, d;
};

Shapes shapes_of(const torch::Tensor& q, const torch::Tensor& k, int64_t heads) {
  return {k.size(0), q.size(0), q.size(1), k.size(1), q.size(2), heads, q.size(2) / heads};
}

// A B×T×C tensor (last dimension contiguous) as GEMM operands: its fp32 storage as it is, or in
// bf16 a packed copy made once. `held` keeps what the pointers point into alive.
struct Tokens {
  torch::Tensor held;
  const char* base;
  int64_t batch, row;  // strides in elements
  bool bf16;

  // Head `head`'s d columns from row `r` of batch entry `b` on (b is ignored for a batch of 1).
  Operand at(int64_t b, int64_t r, int64_t col) const {
    const int64_t offset = (held.size(0) == 1 ? 0 : b * batch) + r * row + col;
    return {base + offset * (bf16 ? 2 : 4), row, bf16};
  }
};

Tokens tokens_of(const torch::Tensor& t, bool bf16) {
  const torch::Tensor held = bf16 && t.scalar_type() == torch::kFloat ? bf16_copy(t) : t;
  return {held, static_cast<const char*>(held.data_ptr()), held.stride(0), held.stride(1),
          held.scalar_type() == torch::kBFloat16};
}

// Scores of query rows [i0, i0+rows) of head hh against every key: S = (Q Kᵀ)/√d.
void scores(const Shapes& s, const Tokens& q, const Tokens& k, int64_t b, int64_t hh, int64_t i0, int64_t rows,
            float* out) {
  gemm(false, true, rows, s.Tk, s.d, 1.0f / std::sqrt(static_cast<float>(s.d)), q.at(b, i0, hh * s.d),
       k.at(b, 0, hh * s.d), 0.0f, out, s.Tk);
}

// An fp32 block of rows×cols (row stride cols) as an operand.
Operand block(const float* p, int64_t cols) { return {p, cols, false}; }

// Head hh of batch entry b as attention_small.h takes it (fp32 tokens).
SmallHead small_head(const Shapes& s, const Tokens& q, const Tokens& k, const Tokens& v, int64_t b, int64_t hh) {
  auto at = [&](const Tokens& t) { return static_cast<const float*>(t.at(b, 0, hh * s.d).data); };
  return {at(q), at(k), at(v), q.row, k.row, v.row, s.Tq, s.Tk, s.d};
}

class FusedAttention : public torch::autograd::Function<FusedAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t heads, double dropout, int64_t seed_bits,
                               int64_t first) {
    const Shapes s = shapes_of(q, k, heads);
    auto out = torch::empty({s.B, s.Tq, s.C}, q.options());
    auto lse = torch::empty({s.B, s.h, s.Tq}, q.options());
    const uint64_t seed = static_cast<uint64_t>(seed_bits);
    const uint32_t threshold = static_cast<uint32_t>(std::lround(dropout * 65536.0));
    const float scale = static_cast<float>(1.0 / (1.0 - dropout));
    const bool bf16 = matmul_precision() == Precision::bf16;
    const Tokens qt = tokens_of(q, bf16), kt = tokens_of(k, bf16), vt = tokens_of(v, bf16);
    float *op = out.data_ptr<float>(), *lp = lse.data_ptr<float>();

    const bool small = !bf16 && small_heads_fit(s.d, s.Tk);
    at::parallel_for(0, s.B * s.h, 1, [&](int64_t begin, int64_t end) {
      const int64_t block_size = block_rows(s.Tk);
      std::vector<float> w(small ? 0 : block_size * s.Tk);
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / s.h, hh = bh % s.h;
        if (small) {
          const SmallDropout drop{dropout > 0, seed, first + bh * s.Tq, threshold, scale};
          small_head_forward(small_head(s, qt, kt, vt, b, hh), drop, op + b * s.Tq * s.C + hh * s.d, s.C,
                             lp + bh * s.Tq);
          continue;
        }
        for (int64_t i0 = 0; i0 < s.Tq; i0 += block_size) {
          const int64_t rows = std::min(block_size, s.Tq - i0);
          scores(s, qt, kt, b, hh, i0, rows, w.data());
          for (int64_t i = 0; i < rows; ++i) {
            float* wi = w.data() + i * s.Tk;
            lp[bh * s.Tq + i0 + i] = softmax_row(wi, s.Tk);
            if (dropout > 0) mask_row(wi, s.Tk, seed, first + bh * s.Tq + i0 + i, threshold, scale);
          }
          gemm(false, false, rows, s.d, s.Tk, 1.0f, block(w.data(), s.Tk), vt.at(b, 0, hh * s.d), 0.0f,
               op + b * s.Tq * s.C + i0 * s.C + hh * s.d, s.C);
        }
      }
    });
    // In bf16, backward keeps the bf16 copies: half the memory, and its GEMMs take them as they are.
    ctx->save_for_backward({qt.held, kt.held, vt.held, lse});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);
    ctx->saved_data["first"] = first;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &lse = saved[3];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const double dropout = ctx->saved_data["dropout"].toDouble();
    const uint64_t seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const int64_t first = ctx->saved_data["first"].toInt();
    const Shapes s = shapes_of(q, k, heads);
    const uint32_t threshold = static_cast<uint32_t>(std::lround(dropout * 65536.0));
    const float scale = static_cast<float>(1.0 / (1.0 - dropout));
    const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(s.d));
    const bool bf16 = q.scalar_type() == torch::kBFloat16;  // as forward ran
    const Tokens qt = tokens_of(q, bf16), kt = tokens_of(k, bf16), vt = tokens_of(v, bf16);
    const Tokens gt = tokens_of(grads[0].contiguous(), bf16);
    // Broadcast queries collect one gradient per key batch, summed at the end.
    const auto f32 = q.options().dtype(torch::kFloat);
    auto dq = torch::zeros({s.B, s.Tq, s.C}, f32);
    auto dk = torch::zeros({s.B, s.Tk, s.C}, f32);
    auto dv = torch::zeros({s.B, s.Tk, s.C}, f32);
    const float* lp = lse.data_ptr<float>();
    float *dqp = dq.data_ptr<float>(), *dkp = dk.data_ptr<float>(), *dvp = dv.data_ptr<float>();

    const bool small = !bf16 && small_heads_fit(s.d, s.Tk);
    at::parallel_for(0, s.B * s.h, 1, [&](int64_t begin, int64_t end) {
      const int64_t block_size = block_rows(s.Tk);
      std::vector<float> p(small ? 0 : block_size * s.Tk), dp(small ? 0 : block_size * s.Tk);
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / s.h, hh = bh % s.h;
        float* dqh = dqp + b * s.Tq * s.C + hh * s.d;
        float* dkh = dkp + b * s.Tk * s.C + hh * s.d;
        float* dvh = dvp + b * s.Tk * s.C + hh * s.d;
        if (small) {
          const SmallDropout drop{dropout > 0, seed, first + bh * s.Tq, threshold, scale};
          small_head_backward(small_head(s, qt, kt, vt, b, hh), drop,
                              static_cast<const float*>(gt.at(b, 0, hh * s.d).data), gt.row, lp + bh * s.Tq, dqh, s.C,
                              dkh, dvh, s.C);
          continue;
        }
        for (int64_t i0 = 0; i0 < s.Tq; i0 += block_size) {
          const int64_t rows = std::min(block_size, s.Tq - i0);
          scores(s, qt, kt, b, hh, i0, rows, p.data());  // recompute P from the saved log-sum-exp
          for (int64_t i = 0; i < rows; ++i) exp_row(p.data() + i * s.Tk, s.Tk, lp[bh * s.Tq + i0 + i]);
          // dP̃ = dO Vᵀ (gradient wrt the dropped-out weights), then through the mask.
          gemm(false, true, rows, s.Tk, s.d, 1.0f, gt.at(b, i0, hh * s.d), vt.at(b, 0, hh * s.d), 0.0f, dp.data(),
               s.Tk);
          for (int64_t i = 0; i < rows; ++i) {
            float *pi = p.data() + i * s.Tk, *dpi = dp.data() + i * s.Tk;
            if (dropout > 0) mask_row(dpi, s.Tk, seed, first + bh * s.Tq + i0 + i, threshold, scale);
            softmax_grad_row(pi, dpi, s.Tk);  // dS
            // dV needs the dropped-out weights P̃ = P∘M: p's row, masked now that dS is formed.
            if (dropout > 0) mask_row(pi, s.Tk, seed, first + bh * s.Tq + i0 + i, threshold, scale);
          }
          gemm(true, false, s.Tk, s.d, rows, 1.0f, block(p.data(), s.Tk), gt.at(b, i0, hh * s.d), 1.0f, dvh, s.C);
          gemm(false, false, rows, s.d, s.Tk, inv_sqrt_d, block(dp.data(), s.Tk), kt.at(b, 0, hh * s.d), 1.0f,
               dqh + i0 * s.C, s.C);
          gemm(true, false, s.Tk, s.d, rows, inv_sqrt_d, block(dp.data(), s.Tk), qt.at(b, i0, hh * s.d), 1.0f, dkh,
               s.C);
        }
      }
    });
    if (s.Bq == 1 && s.B > 1) dq = dq.sum(0, /*keepdim=*/true);
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor native::NativeBackend::fused_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                     const torch::Tensor& v, int64_t heads, double p, uint64_t seed,
                                                     int64_t first) const {
  return FusedAttention::apply(q, k, v, heads, p, static_cast<int64_t>(seed), first);
}

}  // namespace htm
