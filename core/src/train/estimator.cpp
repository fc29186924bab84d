#include "train/estimator.h"

#include <torch/torch.h>

namespace htm {

Estimator::Estimator(const EstimatorSettings& settings) : settings_(settings) {}

torch::Tensor Estimator::objective(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob) {
  auto loss = per_sample_loss.mean();
  torch::Tensor total = loss;
  if (log_prob.defined() && !scales_by_probability()) {
    const double b = baseline();
    if (settings_.reward == RewardScope::sample)
      total = loss + ((per_sample_loss.detach() - b) * log_prob).mean();
    else
      total = loss + (loss.detach() - b) * log_prob.sum();
  }
  if (settings_.baseline == RewardBaseline::ema) {
    const double value = loss.item<double>();
    const double decay = settings_.baseline_decay;
    baseline_ = have_baseline_ ? decay * baseline_ + (1 - decay) * value : value;
    have_baseline_ = true;
  }
  return total;
}

}  // namespace htm
