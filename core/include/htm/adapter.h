// Adapter plugins: the only domain-specific parts — lifting data to tokens and back.
#pragma once

#include <torch/nn/module.h>

#include "htm/plugin.h"

namespace htm {

class Adapter : public Plugin, public torch::nn::Module {
 public:
  ~Adapter() override;
  /// Number of tokens T that lift() makes from one sample of BuildContext::sample_shape.
  virtual int64_t num_tokens() const = 0;
  /// B×sample_shape → B×T×C.
  virtual torch::Tensor lift(const torch::Tensor& input) = 0;
  /// B×T×C decoder tokens → B×sample_shape, in the range the dataset uses.
  virtual torch::Tensor unlift(const torch::Tensor& tokens) = 0;
  /// Per-sample reconstruction error of `output` against `input` (both B×sample_shape): B
  /// values, in the graph through `output`. What evaluation reports as `mse` and the mean-sample
  /// baseline is measured with. Default: the mean squared error; an adapter of sets, whose
  /// output comes in no fixed order, compares after matching (htm/sets.h).
  virtual torch::Tensor reconstruction_error(const torch::Tensor& output, const torch::Tensor& input);
};

}  // namespace htm
