// The hierarchical token-merging autoencoder (paper §3.1). Shapes: B batch, T tokens, C width,
// h heads, r pairs merged at a layer, D depth actually run (≤ L, the schedule's length).
#pragma once

#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "htm/adapter.h"
#include "htm/layers.h"
#include "htm/merge.h"
#include "htm/policy.h"

namespace htm {

struct ModelOptions {
  int64_t dim = 256;
  int64_t heads = 8;
  int64_t mlp_ratio = 4;
  double dropout = 0.1;
  bool transformer = true;      ///< transformer blocks in encoder and decoder (§4.4)
  bool cross_attention = true;  ///< cross-attention in merging/unmerging blocks (§4.4)
  bool prob_scale = false;      ///< A.4: scale merged outputs by their selection probability
};

/// r per layer: r_l = floor(fraction · T_l / 2), for `layers` layers, starting from T tokens.
std::vector<int64_t> make_schedule(int64_t tokens, double fraction, int64_t layers);
/// Tokens left after the first `depth` layers of `schedule`.
int64_t tokens_after(int64_t tokens, const std::vector<int64_t>& schedule, size_t depth);
/// Throws htm::Error unless every layer merges 0 ≤ r ≤ T_l/2 pairs.
void check_schedule(int64_t tokens, const std::vector<int64_t>& schedule);

/// Pre-norm transformer encoder block (MHA + GELU MLP).
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const ModelOptions& o);
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* attention = nullptr);

 private:
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
  torch::Tensor forward(const torch::Tensor& new_tokens, const torch::Tensor& keys,
                        const torch::Tensor& values);

 private:
  bool cross_attention_;
  double dropout_;
  torch::nn::LayerNorm norm_q_{nullptr}, norm_kv_{nullptr};
  Attention attn_{nullptr};
  ResidualMlp mlp_{nullptr};
};
TORCH_MODULE(RefineBlock);

/// Everything one forward pass produces.
struct ForwardResult {
  torch::Tensor output;    ///< B×sample_shape
  torch::Tensor root;      ///< B×T_D×C tokens at the bottleneck
  torch::Tensor log_prob;  ///< B: Σ log p over every merge and unmerge decision (undefined if none)
  std::vector<torch::Tensor> encoder_tokens;  ///< [d] enters encoder layer d+1
  std::vector<torch::Tensor> decoder_tokens;  ///< [d] leaves the decoder layer mirroring it
  std::vector<MergeDecision> merges;          ///< per encoder layer
};

class HtmModelImpl : public torch::nn::Module {
 public:
  HtmModelImpl(const ModelOptions& options, std::shared_ptr<Adapter> adapter,
               std::shared_ptr<Policy> policy, std::shared_ptr<MergeOperator> merge);

  /// Encodes with `schedule` (one r per layer run) and decodes with the same schedule.
  ForwardResult forward(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                        at::Generator generator);

  int64_t num_tokens() const { return adapter_->num_tokens(); }
  Adapter& adapter() { return *adapter_; }
  Policy& policy() { return *policy_; }

 private:
  torch::Tensor merge_layer(const torch::Tensor& x, int64_t r, int64_t depth,
                            const torch::Tensor& attention, at::Generator generator,
                            ForwardResult& result);
  torch::Tensor unmerge_layer(const torch::Tensor& x, int64_t r, int64_t depth,
                              at::Generator generator, ForwardResult& result);
  torch::Tensor timestep(int64_t depth) const;
  void add_log_prob(ForwardResult& result, const torch::Tensor& log_prob) const;

  ModelOptions options_;
  std::shared_ptr<Adapter> adapter_;
  std::shared_ptr<Policy> policy_;
  std::shared_ptr<MergeOperator> merge_;
  TransformerBlock encoder_block_{nullptr}, decoder_block_{nullptr};
  RefineBlock merge_refine_{nullptr}, unmerge_refine_{nullptr};
  torch::Tensor timesteps_;  ///< (max depth + 1)×C fixed sinusoids (paper eq. 7)
};
TORCH_MODULE(HtmModel);

}  // namespace htm
