// The training loop (trainer.cpp): stochastic merging schedule, the estimator's surrogate,
// metrics into the results store; evaluation at the full schedule (evaluation.cpp);
// checkpoints and pictures (artifacts.cpp).
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "store/results_store.h"
#include "train/baselines.h"
#include "train/experiment.h"

namespace htm {

/// Thrown by the loop when Ctrl-C was pressed; the run is then recorded as interrupted.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};
/// Called from a signal handler: asks every loop to stop at its next step.
void request_interrupt();
bool interrupt_requested();
/// Clears a pending request (tests; a long-lived host between runs).
void reset_interrupt();

/// The weighted sum of the experiment's losses for one forward pass, per sample (B). Each
/// term's batch mean is appended to `terms` as "loss/<name>" when given.
torch::Tensor training_objective(const std::vector<WeightedLoss>& losses, const ForwardResult& out,
                                 const Batch& batch, int64_t epoch, int64_t step, bool training,
                                 bool teacher_forced, std::vector<Metric>* terms = nullptr);

struct TrainSummary {
  double test_mse = 0;      ///< reconstruction MSE on the test split at the full schedule
  double accuracy = std::numeric_limits<double>::quiet_NaN();  ///< test accuracy of a classifier
  BaselineScores reference;  ///< mean sample, PCA of the bottleneck's size, ridge classifier
  int64_t steps = 0;
  double seconds = 0;
  double images_per_s = 0;
};

class Trainer {
 public:
  /// `label` prefixes progress lines; artifacts go to `artifact_dir`.
  Trainer(Experiment& experiment, ResultsStore& store, int64_t run_id, std::string artifact_dir,
          int64_t seed, std::string label);
  TrainSummary run();

 private:
  struct Eval {
    double mse = 0;
    double accuracy = 0;  ///< NaN unless the model classifies
    std::vector<Metric> metrics;  ///< loss terms, and the hierarchy scores where there is a truth
    bool learned_trees = false;   ///< whether metrics hold hierarchy scores
  };
  /// One evaluation with the trained policy, then one with each of train.eval_policies.
  Eval evaluate();
  /// One pass over the evaluation samples with the policy deciding now.
  Eval evaluate_once();
  /// The losses' enter_layer() calls, as the model's hook.
  ForwardHooks hooks(int64_t epoch, int64_t step, bool training);
  void log_policy_spread(int64_t step, int64_t epoch);
  /// The floor (uniform random merges) and ceiling (agglomerative clustering) on the first `n`
  /// test samples, and whether the schedule can build their true trees; computed once.
  const std::vector<Metric>& reference_scores(int64_t n);
  void save_checkpoint(int64_t step);
  void save_pictures(int64_t step, const std::string& tag);
  void progress(int64_t epoch, int64_t step, int64_t total_steps, double loss, double rho,
                int64_t depth, double images_per_s, double elapsed_s, bool final_line);

  Experiment& ex_;
  ResultsStore& store_;
  int64_t run_id_;
  std::string artifact_dir_;
  int64_t seed_;
  std::string label_;
  at::Generator generator_;
  int64_t eval_samples_;  ///< test samples each evaluation reads
  std::vector<Metric> reference_scores_;
};

}  // namespace htm
