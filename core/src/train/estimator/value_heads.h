// A learned value baseline for the score-function estimator (estimator.baseline = "value"): the
// loss a sample is expected to end with, predicted from the population a layer's decisions are
// drawn from. It depends on that population and not on the draw, so subtracting it from the
// reward leaves the gradient unbiased, and it credits each layer's draw with how much better or
// worse than expected the sample ended from there: earlier layers' luck is not charged to it.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "model/model.h"

namespace htm {

class ValueHeadsImpl : public torch::nn::Module {
 public:
  explicit ValueHeadsImpl(int64_t dim);
  /// The predicted loss (B) of each sample from the B×T×C population a layer is about to merge
  /// (unmerge = false) or unmerge. The tokens are detached: the value learns from its own
  /// regression alone and teaches the model nothing.
  torch::Tensor forward(const torch::Tensor& tokens, bool unmerge);
  /// The predicted loss (B) from the population `draw` was made from, by the head of its kind.
  torch::Tensor forward(const Draw& draw) { return forward(draw.population, draw.kind == Draw::Kind::unmerge); }

 private:
  torch::nn::Sequential heads_[2];  ///< [0] merges, [1] unmerges: LayerNorm → pool → MLP → 1
};
TORCH_MODULE(ValueHeads);

}  // namespace htm
