// The transformer and refinement blocks (blocks.h).
#include "model/blocks.h"

#include <torch/torch.h>

namespace htm {

TransformerBlockImpl::TransformerBlockImpl(const ModelOptions& o) : dropout_(o.dropout) {
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
  attn_ = register_module("attn", Attention(o.dim, o.heads, o.dropout));
  mlp_ = register_module("mlp", ResidualMlp(o.dim, o.mlp_ratio, o.dropout));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, torch::Tensor* attention) {
  auto h = norm_->forward(x);
  return mlp_->forward(x + fast_dropout(attn_->forward(h, h, attention), dropout_, is_training()));
}

RefineBlockImpl::RefineBlockImpl(const ModelOptions& o) : dropout_(o.dropout) {
  if (o.refinement == Refinement::cross_attention) {
    norm_q_ = register_module("norm_q", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
    norm_kv_ = register_module("norm_kv", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
    attn_ = register_module("attn", Attention(o.dim, o.heads, o.dropout));
  }
  mlp_ = register_module("mlp", ResidualMlp(o.dim, o.mlp_ratio, o.dropout));
}

std::pair<torch::Tensor, torch::Tensor> RefineBlockImpl::key_values(const torch::Tensor& old_tokens) {
  if (!attn_) return {};  // the MLP alone
  return attn_->key_values(norm_kv_->forward(old_tokens));
}

torch::Tensor RefineBlockImpl::forward(const torch::Tensor& new_tokens, const torch::Tensor& keys,
                                       const torch::Tensor& values) {
  auto x = new_tokens;
  if (attn_) x = x + fast_dropout(attn_->attend(norm_q_->forward(x), keys, values), dropout_, is_training());
  return mlp_->forward(x);
}

}  // namespace htm
