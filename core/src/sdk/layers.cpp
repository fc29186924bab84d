#include "htm/layers.h"

#include <cmath>

#include <torch/torch.h>

#include "htm/error.h"
#include "kernels/fused_linear.h"

namespace htm {
LinearImpl::LinearImpl(int64_t in, int64_t out, bool bias) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // as torch::nn::Linear
  weight = register_parameter("weight", torch::empty({out, in}).uniform_(-bound, bound));
  if (bias) this->bias = register_parameter("bias", torch::empty({out}).uniform_(-bound, bound));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) { return linear(x, weight, bias); }

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

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::norm_key_values(const torch::Tensor& kv_tokens,
                                                                       const torch::nn::LayerNormImpl& norm) {
  auto kv = norm_linear(kv_tokens, norm.weight, norm.bias, norm.options.eps(), kv_->weight, kv_->bias).chunk(2, -1);
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

torch::Tensor AttentionImpl::norm_forward(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm,
                                          torch::Tensor* weights) {
  if (weights != nullptr) {
    const auto h = torch::layer_norm(x, {x.size(-1)}, norm.weight, norm.bias, norm.options.eps());
    return forward(h, h, weights);
  }
  auto [q, kv] =
      norm_linear2(x, norm.weight, norm.bias, norm.options.eps(), q_->weight, q_->bias, kv_->weight, kv_->bias);
  const auto k_v = kv.chunk(2, -1);
  return out_->forward(fused_attention(q, k_v[0], k_v[1], heads_, dropout_, is_training()));
}

torch::Tensor AttentionImpl::norm_attend(const torch::Tensor& q_tokens, const torch::nn::LayerNormImpl& norm,
                                         const torch::Tensor& keys, const torch::Tensor& values) {
  const auto q = norm_linear(q_tokens, norm.weight, norm.bias, norm.options.eps(), q_->weight, q_->bias);
  return out_->forward(fused_attention(q, keys, values, heads_, dropout_, is_training()));
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

torch::Tensor norm_mlp(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm, const LinearImpl& fc1,
                       const LinearImpl& fc2) {
  return norm_mlp(x, norm.weight, norm.bias, norm.options.eps(), fc1.weight, fc1.bias, fc2.weight, fc2.bias);
}

torch::Tensor norm_mlp(const torch::Tensor& x, const torch::nn::Sequential& mlp) {
  const torch::nn::SequentialImpl& layers = *mlp;
  const auto* norm = layers.size() == 4 ? layers[0]->as<torch::nn::LayerNorm>() : nullptr;
  const auto* fc1 = norm != nullptr ? layers[1]->as<Linear>() : nullptr;
  const auto* fc2 = fc1 != nullptr && layers[2]->as<torch::nn::GELU>() != nullptr ? layers[3]->as<Linear>() : nullptr;
  if (fc2 == nullptr) throw Error("norm_mlp: the Sequential must be LayerNorm, htm::Linear, GELU, htm::Linear");
  return norm_mlp(x, *norm, *fc1, *fc2);
}

torch::Tensor ResidualMlpImpl::forward(const torch::Tensor& x) {
  return x + fast_dropout(norm_mlp(x, *norm_, *fc1_, *fc2_), dropout_, is_training());
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
  if (norm_) return norm_mlp(x, *norm_, *fc1_, *fc2_);
  return gelu_linear(fc1_->forward(x), fc2_->weight, fc2_->bias);
}

}  // namespace htm
