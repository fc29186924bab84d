// Loss plugins: objectives and regularisers, weighted and summed by the host.
#pragma once

#include <vector>

#include <torch/nn/module.h>

#include "htm/plugin.h"

namespace htm {

/// Everything a loss may look at after one forward pass.
struct LossContext {
  torch::Tensor input;   ///< the batch as the dataset produced it (B×…)
  torch::Tensor output;  ///< the model's output (reconstruction B×… or logits B×K)
  torch::Tensor labels;  ///< B int64, when the dataset has labels
  /// Token populations, outermost first: encoder_tokens[d] enters encoder layer d+1;
  /// decoder_tokens[d] leaves the decoder layer mirroring it (same count of tokens).
  std::vector<torch::Tensor> encoder_tokens;
  std::vector<torch::Tensor> decoder_tokens;
  int64_t epoch = 0;
  int64_t step = 0;
  bool training = true;
};

class Loss : public Plugin, public torch::nn::Module {
 public:
  ~Loss() override;
  /// Per-sample loss, B values, in the graph. The host averages it, weights it and uses it as
  /// the policy's reward.
  virtual torch::Tensor per_sample(const LossContext& ctx) = 0;
};

}  // namespace htm
