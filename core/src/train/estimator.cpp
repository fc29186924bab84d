#include "train/estimator.h"

#include <torch/torch.h>

#include "htm/error.h"

namespace htm {

Estimator::Estimator(const EstimatorSettings& settings) : settings_(settings) {
  if (settings_.baseline == RewardBaseline::rloo && settings_.rollouts < 2)
    throw Error("estimator.baseline = \"rloo\" needs estimator.rollouts of at least 2");
  if (settings_.baseline == RewardBaseline::value && settings_.method == EstimatorMethod::prob_scale)
    throw Error("estimator.baseline = \"value\" is a baseline for the score function: estimator.method = "
                "\"prob_scale\" has no reward to subtract it from");
}

torch::Tensor Estimator::objective(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob,
                                   const torch::Tensor& entropy, const BatchShare& share,
                                   const std::vector<ValuedDecision>& valued) {
  auto loss = per_sample_loss.mean();
  // Over a split batch every mean is over this process's rows, weighted by their share; the
  // batch reward multiplies a sum, which the processes' sum completes.
  auto scaled = [&](const torch::Tensor& mean) { return share.split ? mean * share.fraction : mean; };
  torch::Tensor total = scaled(loss);
  if (log_prob.defined() && !scales_by_probability()) {
    auto g = per_sample_loss.detach();
    if (settings_.baseline == RewardBaseline::rloo) {
      const int64_t K = settings_.rollouts;
      if (g.size(0) % K != 0)
        throw Error("a batch of " + std::to_string(g.size(0)) + " rows is not " + std::to_string(K) + " rollouts of each input");
      auto per_input = g.view({-1, K});
      auto others = (per_input.sum(1, true) - per_input) / static_cast<double>(K - 1);
      total = total + scaled(((per_input - others).view(-1) * log_prob).mean());
    } else if (settings_.baseline == RewardBaseline::value) {
      if (valued.empty()) throw Error("estimator.baseline = \"value\": the model gave no values for its decisions");
      torch::Tensor surrogate = torch::zeros({}), error = torch::zeros({});
      for (const auto& d : valued) {
        surrogate = surrogate + ((g - d.value.detach()) * d.log_prob).mean();
        error = error + (d.value - g).pow(2).mean();
      }
      value_error_ = error.detach() / static_cast<double>(valued.size());
      total = total + scaled(surrogate + error / static_cast<double>(valued.size()));
    } else if (settings_.reward == RewardScope::sample) {
      total = total + scaled(((g - baseline()) * log_prob).mean());
    } else if (share.split) {
      total = total + (share.batch_loss - baseline()) * log_prob.sum();
    } else {
      total = total + (loss.detach() - baseline()) * log_prob.sum();
    }
  }
  if (entropy.defined() && settings_.entropy > 0) total = total - settings_.entropy * scaled(entropy.mean());
  if (settings_.baseline == RewardBaseline::ema) {
    const double value = share.split ? share.batch_loss : loss.item<double>();
    const double decay = settings_.baseline_decay;
    baseline_ = have_baseline_ ? decay * baseline_ + (1 - decay) * value : value;
    have_baseline_ = true;
  }
  return total;
}

}  // namespace htm
