#include "train/estimator/estimator.h"

#include <torch/torch.h>

#include "htm/error.h"

namespace htm {

Estimator::Estimator(const EstimatorSettings& settings, ValueHeads values)
    : settings_(settings), values_(std::move(values)) {
  const auto problems = estimator_problems(settings_);
  if (!problems.empty()) throw Error(problems.front().message);
}

void Estimator::settle() const {
  if (!pending_.defined()) return;
  const double value = pending_.item<double>();
  pending_ = torch::Tensor();
  fold(value);
}

double Estimator::baseline() const {
  if (device_baseline_.defined()) {
    const auto host = device_baseline_.cpu();  // host: a checkpoint reads the baseline
    return host[1].item<double>() > 0 ? host[0].item<double>() : 0.0;
  }
  settle();
  return have_baseline_ ? baseline_ : 0.0;
}

bool Estimator::has_baseline() const {
  if (device_baseline_.defined()) return device_baseline_[1].item<double>() > 0;
  settle();
  return have_baseline_;
}

void Estimator::restore_baseline(double value, bool have) {
  baseline_ = value, have_baseline_ = have, pending_ = torch::Tensor();
  if (device_baseline_.defined()) device_baseline_.copy_(torch::tensor({value, have ? 1.0 : 0.0}, torch::kDouble));
}

void Estimator::keep_baseline_on(const torch::Device& device) {
  settle();
  device_baseline_ = torch::tensor({baseline_, have_baseline_ ? 1.0 : 0.0}, torch::kDouble).to(device);
}

torch::Tensor Estimator::baseline_like(const torch::Tensor& like) const {
  if (device_baseline_.defined()) return (device_baseline_[0] * device_baseline_[1]).to(like.scalar_type());
  return torch::scalar_tensor(baseline(), like.options());
}

void Estimator::fold_loss(const torch::Tensor& loss) {
  if (!device_baseline_.defined()) {
    settle();
    pending_ = loss;
    return;
  }
  const double decay = settings_.baseline_decay;
  auto value = loss.to(torch::kDouble), have = device_baseline_[1];
  auto folded = have * (decay * device_baseline_[0] + (1 - decay) * value) + (1 - have) * value;
  device_baseline_.copy_(torch::stack({folded, torch::ones_like(have)}));
}

void Estimator::fold(double value) const {
  const double decay = settings_.baseline_decay;
  baseline_ = have_baseline_ ? decay * baseline_ + (1 - decay) * value : value;
  have_baseline_ = true;
}

torch::Tensor Estimator::objective(const torch::Tensor& per_sample_loss, const ForwardResult& out,
                                   const BatchShare& share, bool score, const torch::Tensor& reference) {
  // Per draw, in the order drawn: its log-probability summed over the draw, added to the
  // pass's, and the value of the population it was drawn from; each merge draw's pair errors.
  torch::Tensor log_prob;
  std::vector<ValuedDecision> valued;
  if (score && !scales_by_probability())
    for (const Draw& d : out.draws) {
      if (!d.log_prob.defined()) continue;
      auto per_sample = d.log_prob.sum(1);
      log_prob = log_prob.defined() ? log_prob + per_sample : per_sample;
      if (values_) valued.push_back({per_sample, values_->forward(d)});
    }
  std::vector<PairErrors> pair_errors;
  if (score)
    for (const Draw& d : out.draws)
      if (d.pair_error.defined()) pair_errors.push_back({d.log_prob, d.pair_error});
  auto entropy = total_entropy(out);
  auto total = objective(per_sample_loss, log_prob, entropy, share, valued, pair_errors, reference);
  if (entropy.defined()) diagnostics_.insert(diagnostics_.begin(), {"policy_entropy", entropy.mean().detach()});
  return total;
}

torch::Tensor Estimator::objective(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob,
                                   const torch::Tensor& entropy, const BatchShare& share,
                                   const std::vector<ValuedDecision>& valued,
                                   const std::vector<PairErrors>& pair_errors, const torch::Tensor& reference) {
  diagnostics_.clear();
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
        throw Error("a batch of " + std::to_string(g.size(0)) + " rows is not " + std::to_string(K) +
                    " rollouts of each input");
      auto per_input = g.view({-1, K});
      auto others = (per_input.sum(1, true) - per_input) / static_cast<double>(K - 1);
      total = total + scaled(((per_input - others).view(-1) * log_prob).mean());
    } else if (settings_.baseline == RewardBaseline::policy) {  // self-critical: the same input under another policy
      if (!reference.defined() || !reference.sizes().equals(g.sizes()))
        throw Error("estimator.baseline = \"policy\": no reference loss for each sample of the batch");
      auto advantage = g - reference.detach();
      diagnostics_.emplace_back("policy_baseline_loss", reference.detach().mean());
      if (advantage.numel() > 1) diagnostics_.emplace_back("policy_advantage_sd", advantage.std());
      total = total + scaled((advantage * log_prob).mean());
    } else if (settings_.baseline == RewardBaseline::value) {
      if (valued.empty()) throw Error("estimator.baseline = \"value\": the model gave no values for its decisions");
      torch::Tensor surrogate = g.new_zeros({}), error = g.new_zeros({});
      for (const auto& d : valued) {
        surrogate = surrogate + ((g - d.value.detach()) * d.log_prob).mean();
        error = error + (d.value - g).pow(2).mean();
      }
      diagnostics_.emplace_back("policy_value_error", error.detach() / static_cast<double>(valued.size()));
      total = total + scaled(surrogate + error / static_cast<double>(valued.size()));
    } else if (settings_.reward == RewardScope::sample) {
      total = total + scaled(((g - baseline_like(g)) * log_prob).mean());
    } else if (share.split) {
      total = total + (share.batch_loss - baseline()) * log_prob.sum();
    } else {
      total = total + (loss.detach() - baseline_like(loss)) * log_prob.sum();
    }
  }
  if (log_prob.defined() && settings_.dense > 0 && !pair_errors.empty()) {
    torch::Tensor dense = log_prob.new_zeros({}), error = log_prob.new_zeros({});
    for (const auto& layer : pair_errors) {
      auto to_go = layer.error.flip(1).cumsum(1).flip(1);  // B×r: pair k's error and its layer's later ones
      const int64_t B = to_go.size(0);
      auto others = B > 1 ? (to_go.sum(0, true) - to_go) / static_cast<double>(B - 1) : torch::zeros_like(to_go);
      dense = dense + ((to_go - others) * layer.log_prob).sum(1).mean();
      error = error + layer.error.mean();
    }
    total = total + scaled(settings_.dense * dense);
    diagnostics_.emplace_back("policy_pair_error", error / static_cast<double>(pair_errors.size()));
  }
  if (entropy.defined() && settings_.entropy > 0) total = total - settings_.entropy * scaled(entropy.mean());
  if (settings_.baseline == RewardBaseline::ema) {
    if (share.split) {
      settle();
      fold(share.batch_loss);
    } else {
      fold_loss(loss.detach());
    }
  }
  return total;
}

torch::Tensor Estimator::replayed(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob,
                                  const torch::Tensor& merge_log_prob, const torch::Tensor& behaviour) {
  auto w = (merge_log_prob.detach() - behaviour).exp().clamp_max(settings_.replay_clip);
  diagnostics_.emplace_back("policy_replay_weight", w.mean());
  auto g = per_sample_loss.detach();
  const int64_t R = g.size(0);
  auto others = R > 1 ? (g.sum() - g) / static_cast<double>(R - 1) : torch::zeros_like(g);
  auto total = (w * per_sample_loss).mean();
  if (log_prob.defined()) total = total + (w * (g - others) * log_prob).mean();
  return total;
}

}  // namespace htm
