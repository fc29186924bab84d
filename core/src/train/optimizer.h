// AdamW (Loshchilov & Hutter), computed exactly as torch::optim::AdamW does, in one pass over
// each parameter with no temporary tensors. torch's version issues about ten tensor ops per
// parameter; at the studies' size (≈120 small parameter tensors) that is a tenth of a step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace htm {

class FusedAdamW {
 public:
  FusedAdamW(std::vector<at::Tensor> params, double lr, double weight_decay, double beta1 = 0.9, double beta2 = 0.999,
             double eps = 1e-8);
  void set_lr(double lr) { lr_ = lr; }
  /// Drops every gradient (the next backward pass writes fresh ones).
  void zero_grad();
  /// One update of every parameter that has a gradient (float32, contiguous).
  void step();
  /// The moments and step counts, under `prefix` (a resumed run continues bit for bit).
  void save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  /// Restores what save() wrote; throws htm::Error when it was written for other parameters.
  void load(torch::serialize::InputArchive& archive, const std::string& prefix);
  /// The parameters it updates, and the bytes of its two moments.
  const std::vector<at::Tensor>& params() const { return params_; }
  int64_t state_bytes() const;

 private:
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;  ///< per parameter, as torch counts them
  double lr_, weight_decay_, beta1_, beta2_, eps_;
};

}  // namespace htm
