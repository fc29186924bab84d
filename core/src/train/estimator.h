// How the gradient through the discrete merge and unmerge decisions is estimated (paper §3.1.5,
// eq. 2-4, and A.4): the method, the reward, its baseline and the surrogate whose gradient is
// the estimate. The trainer and `htm bench` both train through this one object.
#pragma once

#include <torch/types.h>

#include "config/settings.h"

namespace htm {

class Estimator {
 public:
  explicit Estimator(const EstimatorSettings& settings);

  /// A.4: the model scales merged outputs by their selection probability, and the gradient
  /// flows through that product instead of a score-function term.
  bool scales_by_probability() const { return settings_.method == EstimatorMethod::prob_scale; }

  /// The objective to differentiate, from the per-sample loss (B) and the per-sample sum of
  /// the decisions' log-probabilities (B; undefined when nothing was sampled):
  ///   batch reward (paper):  mean_b g_b + sg[mean_b g_b − baseline] · Σ_b log p_b
  ///   per-sample reward:     mean_b g_b + mean_b (sg[g_b] − baseline) · log p_b
  /// With prob_scale, or no log-probabilities, it is the plain mean. Then updates the baseline
  /// with this batch's loss (an ema baseline lags one step: it never includes its own reward).
  torch::Tensor objective(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob);

  /// What objective() subtracts from the reward now.
  double baseline() const { return have_baseline_ ? baseline_ : 0.0; }

 private:
  EstimatorSettings settings_;
  double baseline_ = 0;
  bool have_baseline_ = false;
};

}  // namespace htm
