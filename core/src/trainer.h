// The training loop: stochastic merging schedule, score-function surrogate, evaluation at the
// full schedule, metrics into the results store, checkpoints and reconstruction pictures.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "baselines.h"
#include "experiment_config.h"
#include "htm/dataset.h"
#include "htm/loss.h"
#include "model.h"
#include "results_store.h"

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

struct WeightedLoss {
  std::string name;
  double weight;
  std::shared_ptr<Loss> loss;
};

/// A model and its data, assembled from a resolved config (see runner.h).
struct Experiment {
  ResolvedConfig config;
  std::shared_ptr<Dataset> dataset;
  std::shared_ptr<Model> model;
  std::vector<WeightedLoss> losses;
  std::vector<int64_t> schedule;  ///< the full merging schedule (empty for a ViT)
  int64_t parameters = 0;         ///< every parameter of the model and its plugins
  int64_t participating = 0;      ///< those a training step updates (participating_parameters)
  int64_t latent_floats = 0;      ///< floats at an autoencoder's bottleneck (tokens × width); 0: none
};

/// How the gradient through discrete decisions is estimated (paper §3.1.5, eq. 2-4).
struct Estimator {
  bool per_sample_reward = false;  ///< reward each sample's decisions with its own loss
  double baseline = 0;             ///< subtracted from the reward (0: the paper's choice)
};

/// The surrogate whose gradient is the score-function estimate of ∇E[loss] (paper eq. 4):
///   batch reward (paper):  mean_b g_b + sg[mean_b g_b − baseline] · Σ_b log p_b
///   per-sample reward:     mean_b g_b + mean_b (sg[g_b] − baseline) · log p_b
/// per_sample_loss and log_prob are B vectors; an undefined log_prob leaves the plain mean.
torch::Tensor surrogate_objective(const torch::Tensor& per_sample_loss,
                                  const torch::Tensor& log_prob, const Estimator& estimator);

/// The weighted sum of the experiment's losses for one forward pass, per sample (B). Each
/// term's batch mean is appended to `terms` as "loss/<name>" when given.
torch::Tensor training_objective(const std::vector<WeightedLoss>& losses, const ForwardResult& out,
                                 const Batch& batch, int64_t epoch, int64_t step, bool training,
                                 bool teacher_forced, std::vector<Metric>* terms = nullptr);

/// Draws the depth d ∈ {1..layers} with P(d) ∝ ρ^d (paper §3.1.4).
int64_t sample_depth(double rho, int64_t layers, at::Generator generator);
/// ρ at an epoch: min(1, ρ₀ + epoch·step).
double rho_at(double rho0, double rho_step, int64_t epoch);
/// ρ at `step` of a linear ramp from ρ₀ to ρ_end over the first `ramp` fraction of `total_steps`.
double rho_ramp_at(double rho0, double rho_end, double ramp, int64_t step, int64_t total_steps);

/// The learning rate over a run.
struct LrSchedule {
  double lr = 1e-4;
  int64_t warmup_steps = 0;   ///< linear rise from 0 over these steps
  bool cosine = false;        ///< cosine decay to 0 at total_steps; else the paper's step decay
  std::vector<int64_t> decay_epochs;  ///< step decay: × decay_factor at each (epoch > 0)
  double decay_factor = 0.1;
  int64_t total_steps = 1;
};
/// The learning rate for 0-based `step`, in `epoch`.
double lr_at(const LrSchedule& schedule, int64_t step, int64_t epoch);

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
  };
  Eval evaluate();
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
  double baseline_ = 0;
  bool have_baseline_ = false;
  std::vector<Metric> reference_scores_;
};

}  // namespace htm
