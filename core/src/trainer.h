// The training loop: stochastic merging schedule, score-function surrogate, evaluation at the
// full schedule, metrics into the results store, checkpoints and reconstruction pictures.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

struct WeightedLoss {
  std::string name;
  double weight;
  std::shared_ptr<Loss> loss;
};

/// A model and its data, assembled from a resolved config (see runner.h).
struct Experiment {
  ResolvedConfig config;
  std::shared_ptr<Dataset> dataset;
  HtmModel model{nullptr};
  std::vector<WeightedLoss> losses;
  std::vector<int64_t> schedule;  ///< the full merging schedule
};

/// Draws the depth d ∈ {1..layers} with P(d) ∝ ρ^d (paper §3.1.4).
int64_t sample_depth(double rho, int64_t layers, at::Generator generator);
/// ρ at an epoch: min(1, ρ₀ + epoch·step).
double rho_at(double rho0, double rho_step, int64_t epoch);

struct TrainSummary {
  double test_mse = 0;      ///< reconstruction MSE on the test split at the full schedule
  double baseline_mse = 0;  ///< MSE of predicting the mean training sample
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
    std::vector<Metric> losses;
  };
  Eval evaluate();
  double baseline_mse();
  torch::Tensor objective(const ForwardResult& out, const Batch& batch, int64_t epoch, bool training,
                          std::vector<Metric>* terms);
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
};

}  // namespace htm
