// The model's two kinds of block (paper §4.4): the pre-norm transformer block that mixes a
// population, and the refinement after a merge or unmerge (cross-attention of the new population
// over the old one, then a residual MLP; or the MLP alone). With ModelOptions::recompute_blocks a
// block in training keeps only its inputs for backward, which runs it again from the same state
// of the global generator (its dropout masks' seeds), then puts the generator back.
#pragma once

#include <utility>

#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>

#include "htm/layers.h"
#include "model/options.h"

namespace htm {

/// Pre-norm transformer encoder block (MHA + GELU MLP).
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const ModelOptions& o);
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* attention = nullptr);

 private:
  torch::Tensor compute(const torch::Tensor& x, torch::Tensor* attention);
  bool recompute_;
  torch::nn::LayerNorm norm_{nullptr};
  Attention attn_{nullptr};
  double dropout_;
  ResidualMlp mlp_{nullptr};
};
TORCH_MODULE(TransformerBlock);

/// Cross-attention of the new population over the old one, then a residual MLP.
class RefineBlockImpl : public torch::nn::Module {
 public:
  RefineBlockImpl(const ModelOptions& o);
  /// Keys of the old population as the cross-attention sees them (B×T×C), for shared-key policies.
  std::pair<torch::Tensor, torch::Tensor> key_values(const torch::Tensor& old_tokens);
  torch::Tensor forward(const torch::Tensor& new_tokens, const torch::Tensor& keys, const torch::Tensor& values);

 private:
  torch::Tensor compute(const torch::Tensor& new_tokens, const torch::Tensor& keys, const torch::Tensor& values);
  bool recompute_;
  double dropout_;
  torch::nn::LayerNorm norm_q_{nullptr}, norm_kv_{nullptr};
  Attention attn_{nullptr};  ///< none: the MLP alone (model.refinement = "mlp")
  ResidualMlp mlp_{nullptr};
};
TORCH_MODULE(RefineBlock);

}  // namespace htm
