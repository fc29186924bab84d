// How the gradient through the discrete merge and unmerge decisions is estimated (paper §3.1.5,
// eq. 2-4, and A.4): the method, the reward, its baseline and the surrogate whose gradient is
// the estimate. It reads the model's neutral record of its draws (ForwardResult::draws) and
// owns what assigns them credit: the value heads (value_heads.h), the dense reward's pair errors
// (Draw::pair_error, measured by the model when ForwardHooks::pair_errors asks), RLOO, the entropy bonus and replay's
// importance weights (replay.h). One training step (train/step.h), which the trainer and `htm bench` share, trains
// through this one object.
#pragma once

#include <torch/types.h>

#include "config/settings.h"
#include "model/model.h"
#include "train/estimator/value_heads.h"

namespace htm {

/// A data-parallel process's part of a step's batch: the gradients of the processes' objectives
/// are summed, and that sum is the gradient of the whole batch's objective.
struct BatchShare {
  double fraction = 1;    ///< this process's rows / the whole batch's rows (1 unsplit)
  double batch_loss = 0;  ///< the whole batch's mean loss (the batch reward, the ema baseline)
  bool split = false;     ///< false: this process holds the whole batch (then the rest is unused)
};

/// One draw with log-probabilities and the value of the population it was drawn from.
struct ValuedDecision {
  torch::Tensor log_prob;  ///< B: Σ log p of the draw
  torch::Tensor value;     ///< B: the value heads' predicted loss (value_heads.h)
};

/// One merge draw, pair by pair, with how well each merged pair comes apart again.
struct PairErrors {
  torch::Tensor log_prob;  ///< B×r: the draw's log-probabilities, pair k given pairs 1…k−1
  torch::Tensor error;     ///< B×r: mean over channels of (unmerge(merged) − (dst, src))², no gradient
};

class Estimator {
 public:
  /// Refuses settings that break a cross-setting rule (config/settings.h: estimator_problems).
  /// `values`: the value baseline's heads (estimator.baseline = "value"), registered in the model
  /// so that its optimiser and checkpoint hold them; null otherwise.
  explicit Estimator(const EstimatorSettings& settings, ValueHeads values = nullptr);

  /// Whether a training pass should measure its merge draws' pair errors (estimator.dense):
  /// ForwardHooks::pair_errors.
  bool wants_pair_errors() const { return settings_.dense > 0; }
  /// Whether a training step should measure each sample's reference loss: the same inputs, the
  /// same weights, the merges of estimator.baseline_policy (baseline = "policy"), no gradients.
  bool wants_reference() const { return settings_.baseline == RewardBaseline::policy; }

  /// objective() below, from a pass's record: the draws' log-probabilities summed in the order
  /// drawn, the value heads' predictions for the populations they were drawn from, the merge
  /// draws' entropies and their pair errors (Draw::pair_error). `score` false (a teacher-forced step): no
  /// score-function terms; the loss, the entropy bonus and the ema baseline's update remain.
  torch::Tensor objective(const torch::Tensor& per_sample_loss, const ForwardResult& out, const BatchShare& share = {},
                          bool score = true, const torch::Tensor& reference = {});

  /// A.4: the model scales merged outputs by their selection probability, and the gradient
  /// flows through that product instead of a score-function term.
  bool scales_by_probability() const { return settings_.method == EstimatorMethod::prob_scale; }

  /// How many times each input is repeated in a step's batch (estimator.rollouts): the rows of
  /// one input are adjacent, so a batch of B·K rows holds K rollouts of each of B inputs.
  int64_t rollouts() const { return settings_.rollouts; }

  /// The objective to differentiate, from the per-sample loss g (B), the per-sample sum of the
  /// decisions' log-probabilities (B; undefined when nothing was sampled) and of the merge
  /// distributions' entropies H (B; undefined when none):
  ///   batch reward (paper):  mean_b g_b + sg[mean_b g_b − c] · Σ_b log p_b
  ///   per-sample reward:     mean_b g_b + mean_b (sg[g_b] − c_b) · log p_b
  /// with c the baseline: 0 (none), a moving average of earlier batches' mean loss (ema), or
  /// the mean loss of the same input's other rollouts (rloo, always per sample), or the loss of
  /// the same input under another policy's merges (policy: `reference`, self-critical, always per
  /// sample). With the
  /// learned value baseline (value, always per sample), each layer's draw k has its own:
  ///   mean_b g_b + Σ_k mean_b (sg[g_b] − sg[V_kb]) · log p_kb + mean_k mean_b (V_kb − sg[g_b])²
  /// from `valued`, whose last term trains the values. With an
  /// entropy weight w, − w · mean_b H_b is added. With a dense weight w_d, each merge layer's
  /// pair k is also credited with the local errors of pairs k…r of its layer (`pair_errors`;
  /// pair k's draw decides which pairs are left for the later ones) minus the same sum for the
  /// batch's other samples:  + w_d · mean_b Σ_k sg[E_bk − mean_{b'≠b} E_b'k] · log p_bk.
  /// With prob_scale, or no log-probabilities, the first term alone. Then updates the ema
  /// baseline with this batch's loss (it lags one step: it never includes its own reward). With a `share` of a split
  /// batch, this process's part: means scaled by its fraction of the rows, the batch reward from the whole batch's
  /// loss.
  torch::Tensor objective(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob,
                          const torch::Tensor& entropy = {}, const BatchShare& share = {},
                          const std::vector<ValuedDecision>& valued = {},
                          const std::vector<PairErrors>& pair_errors = {}, const torch::Tensor& reference = {});
  /// The replayed rows' part of the objective (estimator.replay), from their per-sample loss g
  /// (R), the log-probability of their decisions now (R: the replayed merges scored by today's
  /// policy, plus today's unmerge draws), of their merges now (R) and under the policy that drew
  /// them (q, R):
  ///   mean_b w_b g_b + mean_b w_b (sg[g_b] − c_b) · log p_b,   w_b = sg[min(p_b(merges) / q_b, clip)]
  /// with c_b the mean loss of the other replayed rows. Untruncated, both terms are unbiased
  /// for today's policy: the decoder learns from the replayed trees as often as that policy
  /// would draw them. Adds `policy_replay_weight` (the mean w) to diagnostics().
  torch::Tensor replayed(const torch::Tensor& per_sample_loss, const torch::Tensor& log_prob,
                         const torch::Tensor& merge_log_prob, const torch::Tensor& behaviour);

  /// What the last objective() and replayed() measured beside the objective, as training
  /// metrics (detached scalars): `policy_entropy` (the mean over samples of the merge draws'
  /// summed entropy) where the policy reports one, `policy_value_error` (mean_k mean_b
  /// (V_kb − g_b)², how well the values predict the loss) with the value baseline,
  /// `policy_pair_error` (the mean local error of a merged pair) with the dense reward.
  const std::vector<std::pair<std::string, torch::Tensor>>& diagnostics() const { return diagnostics_; }

  /// What objective() subtracts from the reward now (the ema baseline; 0 for none and rloo).
  double baseline() const;
  /// The ema baseline's state, and its restoration (a resumed run).
  bool has_baseline() const;
  void restore_baseline(double value, bool have);
  /// Keeps the ema baseline on `device` from now on, as a float64 tensor that objective() reads
  /// and updates in place: a step a CUDA graph replays reads no host value (train/step_graph.h).
  void keep_baseline_on(const torch::Device& device);
  /// A copy of the baseline kept on the device ({value, have}), undefined where it is not: a
  /// replayed step that is done again restores it (restore_baseline).
  torch::Tensor device_baseline() const {
    return device_baseline_.defined() ? device_baseline_.clone() : torch::Tensor();
  }

 private:
  /// Folds the last objective's loss into the ema. Read when the baseline is next needed (the
  /// next step, a checkpoint), not inside the step: on a GPU the read waits for the step's work.
  void settle() const;
  void fold(double value) const;

  EstimatorSettings settings_;
  ValueHeads values_;
  mutable double baseline_ = 0;
  mutable bool have_baseline_ = false;
  mutable torch::Tensor pending_;  ///< the last objective's mean loss, not yet folded in
  /// keep_baseline_on(): {value, have (0 or 1)} in float64 on the device; undefined: on the host.
  torch::Tensor device_baseline_;
  /// The ema baseline as objective() subtracts it from a loss of `like`'s type.
  torch::Tensor baseline_like(const torch::Tensor& like) const;
  /// Folds `loss` (a scalar) into the ema: on the device where the baseline lives there.
  void fold_loss(const torch::Tensor& loss);
  std::vector<std::pair<std::string, torch::Tensor>> diagnostics_;
};

}  // namespace htm
