// Merge-operator plugins: the learned maps that turn two tokens into one and back.
#pragma once

#include <torch/nn/module.h>

#include "htm/plugin.h"

namespace htm {

class MergeOperator : public Plugin, public torch::nn::Module {
 public:
  ~MergeOperator() override;
  /// Merges `src` into `dst` pairwise: both N×C (N pairs flattened over the batch) → N×C.
  virtual torch::Tensor merge(const torch::Tensor& src, const torch::Tensor& dst) = 0;
  /// Splits each token in two: N×C → {N×C, N×C}.
  virtual std::pair<torch::Tensor, torch::Tensor> unmerge(const torch::Tensor& tokens) = 0;
};

}  // namespace htm
