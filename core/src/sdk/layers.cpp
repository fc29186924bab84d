#include "htm/layers.h"

#include <cmath>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/row_shard.h"
#include "sdk/counter_rng.h"
#include "sdk/fused_linear.h"

namespace htm {
namespace {

// Mask of 0 and 1/(1-p): entry n is kept iff the (first + n)-th 16-bit draw of stream `seed` is
// ≥ p·2¹⁶. Counter-based, so the mask is the same for any thread count; `first` places a
// data-parallel process's rows within the whole batch's mask (row_shard.h).
torch::Tensor keep_mask(at::IntArrayRef sizes, double p, uint64_t seed, int64_t first) {
  auto mask = torch::empty(sizes, torch::kFloat);
  float* m = mask.data_ptr<float>();
  const int64_t n = mask.numel();
  const uint32_t threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  if (first % 4 != 0) {  // not word-aligned: one draw's lane per entry
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const uint64_t g = static_cast<uint64_t>(first + e);
        m[e] = ((counter_bits(seed, g / 4) >> (16 * (g % 4))) & 0xffff) >= threshold ? scale : 0.0f;
      }
    });
    return mask;
  }
  const int64_t w0 = first / 4;
  at::parallel_for(0, (n + 3) / 4, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const uint64_t bits = counter_bits(seed, static_cast<uint64_t>(w0 + w));
      for (int64_t k = 0; k < 4 && 4 * w + k < n; ++k)
        m[4 * w + k] = ((bits >> (16 * k)) & 0xffff) >= threshold ? scale : 0.0f;
    }
  });
  return mask;
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double p) {
    uint64_t seed;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      seed = at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
    }
    const DrawRows rows = x.dim() > 0 ? draw_rows(x.size(0)) : DrawRows{0, 0};
    const int64_t first = x.dim() > 0 && x.size(0) > 0 ? rows.offset * (x.numel() / x.size(0)) : 0;
    // Backward draws the mask again from its seed instead of keeping it (an x-sized tensor).
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);
    ctx->saved_data["first"] = first;
    return x * keep_mask(x.sizes(), p, seed, first);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto mask = keep_mask(grad[0].sizes(), ctx->saved_data["p"].toDouble(),
                          static_cast<uint64_t>(ctx->saved_data["seed"].toInt()), ctx->saved_data["first"].toInt());
    return {grad[0] * mask, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (p >= 1) return torch::zeros_like(x);
  return DropoutFunction::apply(x, p);
}

// ---------------------------------------------------------------------------------------------
// Attention

AttentionImpl::AttentionImpl(int64_t dim, int64_t heads, double dropout) : heads_(heads), dropout_(dropout) {
  if (dim % heads != 0)
    throw Error("model.dim (" + std::to_string(dim) + ") must be divisible by model.heads (" + std::to_string(heads) +
                ")");
  q_ = register_module("q", Linear(dim, dim));
  kv_ = register_module("kv", Linear(dim, 2 * dim));
  out_ = register_module("out", Linear(dim, dim));
}

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::key_values(const torch::Tensor& kv_tokens) {
  auto kv = kv_->forward(kv_tokens).chunk(2, -1);
  return {kv[0], kv[1]};
}

torch::Tensor AttentionImpl::attend(const torch::Tensor& q_tokens, const torch::Tensor& keys,
                                    const torch::Tensor& values, torch::Tensor* weights) {
  if (weights == nullptr)
    return out_->forward(fused_attention(q_->forward(q_tokens), keys, values, heads_, dropout_, is_training()));
  // The weights are wanted (a policy reads them): the plain computation keeps them.
  // Queries may have batch 1 and broadcast over the keys' batch.
  const int64_t B = keys.size(0), Tq = q_tokens.size(1), Tk = keys.size(1);
  const int64_t C = q_tokens.size(2), d = C / heads_;
  auto split = [&](const torch::Tensor& t, int64_t n) {  // b×n×C → b×h×n×d
    return t.view({t.size(0), n, heads_, d}).transpose(1, 2);
  };
  auto q = split(q_->forward(q_tokens), Tq) * (1.0 / std::sqrt(static_cast<double>(d)));
  auto att = torch::softmax(torch::matmul(q, split(keys, Tk).transpose(-2, -1)), -1);
  *weights = att.mean(1);
  auto y = torch::matmul(fast_dropout(att, dropout_, is_training()), split(values, Tk));  // B×h×Tq×d
  return out_->forward(y.transpose(1, 2).reshape({B, Tq, C}));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& q_tokens, const torch::Tensor& kv_tokens,
                                     torch::Tensor* weights, torch::Tensor* keys) {
  auto [k, v] = key_values(kv_tokens);
  if (keys != nullptr) *keys = k;
  return attend(q_tokens, k, v, weights);
}

ResidualMlpImpl::ResidualMlpImpl(int64_t dim, int64_t ratio, double dropout) : dropout_(dropout) {
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  fc1_ = register_module("fc1", Linear(dim, ratio * dim));
  fc2_ = register_module("fc2", Linear(ratio * dim, dim));
}

torch::Tensor ResidualMlpImpl::forward(const torch::Tensor& x) {
  auto h = norm_linear(x, norm_->weight, norm_->bias, norm_->options.eps(), fc1_->weight, fc1_->bias);
  return x + fast_dropout(gelu_linear(h, fc2_->weight, fc2_->bias), dropout_, is_training());
}

TokenMlpImpl::TokenMlpImpl(int64_t in, int64_t hidden, int64_t out, bool residual_form) {
  if (residual_form) norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({in})));
  fc1_ = register_module("fc1", Linear(in, hidden));
  fc2_ = register_module("fc2", Linear(hidden, out));
  if (residual_form) {
    torch::NoGradGuard no_grad;
    fc2_->weight.zero_();
    fc2_->bias.zero_();
  }
}

torch::Tensor TokenMlpImpl::forward(const torch::Tensor& x) {
  auto h = norm_ ? norm_linear(x, norm_->weight, norm_->bias, norm_->options.eps(), fc1_->weight, fc1_->bias)
                 : fc1_->forward(x);
  return gelu_linear(h, fc2_->weight, fc2_->bias);
}

}  // namespace htm
