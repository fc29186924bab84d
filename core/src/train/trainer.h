// The training loop (trainer.cpp): stochastic merging schedule, the estimator's surrogate,
// metrics into the results store; evaluation at the full schedule (evaluation.cpp);
// checkpoints and pictures (artifacts.cpp).
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "store/results_store.h"
#include "train/baselines.h"
#include "train/estimator/estimator.h"
#include "train/experiment.h"
#include "train/objective.h"

namespace htm {

class Communicator;

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

/// Where a run stands: what its checkpoint holds besides weights, optimiser moments and random
/// streams, so that a resumed run continues exactly where the checkpoint was written.
struct LoopState {
  int64_t step = 0;   ///< steps done
  int64_t epoch = 0;  ///< the epoch under way
  int64_t batch = 0;  ///< the next batch of that epoch
  at::Tensor order;   ///< this epoch's order of the training samples
  double epoch_loss = 0;
  int64_t epoch_batches = 0;
  double running_loss = 0, images_per_s = 0;
  int64_t images = 0;
  double seconds = 0;  ///< training time spent before this process took over
  double test_mse = std::numeric_limits<double>::quiet_NaN(), accuracy = std::numeric_limits<double>::quiet_NaN();
};

struct TrainerOptions {
  /// Continue from the artifact folder's checkpoint when it holds a training state (metrics
  /// logged after it are dropped and logged again); otherwise start at step 0.
  bool resume = false;
  /// 0: no progress lines (--quiet); 1: a progress line at each logged step; 2: also one line
  /// per evaluation with its scores (--verbose).
  int verbosity = 1;
  /// Called after each step (and its checkpoint, if one was due): tests stop a run here.
  std::function<void(int64_t step)> after_step;
  /// Data-parallel training (dist/communicator.h): every rank runs the same loop on its rows of
  /// each batch and the gradients are summed; rank 0 alone writes checkpoints and pictures (and
  /// is given the real results store). Null: one process.
  Communicator* comm = nullptr;
};

class FusedAdamW;
class EvalGraphs;

/// Where one process's part of a run went (a resumed run's earlier processes are not in it).
struct RunTime {
  int64_t steps = 0;
  double step_seconds = 0;  ///< the training steps, their batches included
  int64_t evaluations = 0;
  double evaluation_seconds = 0;  ///< the test passes (every policy evaluated, the tree scores)
  double seconds = 0;             ///< all of it: the rest is references, logging, checkpoints, pictures
  bool resumed = false;           ///< the run began in an earlier process
};

/// "3072 steps 41.2 s, 48 evaluations 15.3 s, the rest 3.1 s", and "(this process's part)" first
/// where the run was resumed: what `htm run` prints after a run's result.
std::string describe(const RunTime& time);

struct TrainSummary {
  double test_mse = 0;  ///< reconstruction MSE on the test split at the full schedule
  double accuracy = std::numeric_limits<double>::quiet_NaN();  ///< test accuracy of a classifier
  BaselineScores reference;  ///< mean sample, PCA of the bottleneck's size, ridge classifier
  int64_t steps = 0;
  double seconds = 0;
  double images_per_s = 0;
  std::string graphs;  ///< runtime.cuda_graph: what its graphs did (TrainStep::graph_summary)
  RunTime time;
};

class Trainer {
 public:
  /// `label` prefixes progress lines; artifacts go to `artifact_dir`.
  Trainer(Experiment& experiment, ResultsStore& store, int64_t run_id, std::string artifact_dir, int64_t seed,
          std::string label);
  Trainer(Experiment& experiment, ResultsStore& store, int64_t run_id, std::string artifact_dir, int64_t seed,
          std::string label, TrainerOptions options);
  ~Trainer();
  TrainSummary run();
  /// The step a resumed run continued from (0: it started afresh).
  int64_t resumed_from() const { return resumed_from_; }

 private:
  // The loop, in the order run() calls them (trainer.cpp).
  struct Loop;
  /// The run's sizes, the data order's stream and the training step.
  Loop plan();
  /// The references logged (or the checkpoint resumed), rank 0's weights on every rank, the
  /// clocks started; returns the references.
  BaselineScores start(Loop& loop);
  /// The next batch, a new epoch's order when the last epoch ended; false when training is done.
  bool next_batch(Loop& loop);
  /// One step on the batch (stopping first, between two steps, when asked to), its bookkeeping
  /// and its metrics; whether it ended an epoch.
  bool train_batch(Loop& loop);
  /// Evaluation when due, the checkpoint, the heartbeat on the run's claim.
  void after_batch(Loop& loop, bool epoch_end);
  /// The loss of the step left pending (TrainStep::read_loss_later) read and accounted for.
  void settle(Loop& loop);
  /// Step `step`'s loss into the epoch's and the running loss; a loss that is not finite stops
  /// the run ("training diverged at step N").
  void account(Loop& loop, double loss, int64_t step);
  void log_eval(Loop& loop, int64_t step, int64_t epoch);
  void checkpoint(Loop& loop);

  struct Eval {
    double mse = 0;
    double accuracy = 0;          ///< NaN unless the model classifies
    std::vector<Metric> metrics;  ///< loss terms, and the hierarchy scores where there is a truth
    bool learned_trees = false;   ///< whether metrics hold hierarchy scores
  };
  /// One evaluation with the trained policy, then one with each of train.eval_policies.
  Eval evaluate();
  /// One pass over the evaluation samples with the policy deciding now, named `policy` (its
  /// batches' graphs under runtime.cuda_graph).
  Eval evaluate_once(const std::string& policy);
  /// Appends `under`'s mse, accuracy and metrics to e's metrics, each name prefixed.
  static void append_under(const std::string& prefix, const Eval& under, Eval& e);
  void log_policy_spread(int64_t step, int64_t epoch);
  /// The policy's first-layer logits over the first (up to 64) test inputs (n×T×T), or none.
  at::Tensor first_layer_logits();
  /// runtime.pictures_every: the pictures at an epoch's end (files named by the step), drawing
  /// nothing from any generator training uses.
  void save_step_pictures(int64_t step);
  /// The floor (uniform random merges) and ceiling (agglomerative clustering) on the first `n`
  /// test samples, and whether the schedule can build their true trees; computed once.
  const std::vector<Metric>& reference_scores(int64_t n);
  /// The model, both optimisers, the estimator's baseline, every random stream and `state`,
  /// written to a temporary file and renamed (a kill never leaves a torn checkpoint; a failed
  /// write removes the temporary file and throws htm::Error).
  void save_checkpoint(const LoopState& state, const FusedAdamW& optimizer, const FusedAdamW& policy_optimizer,
                       const Estimator& estimator, const at::Generator& data_gen);
  /// Restores what save_checkpoint() wrote; false when there is no checkpoint with a state.
  /// Data-parallel: rank 0 reads the file and every rank loads its bytes.
  bool load_checkpoint(LoopState& state, FusedAdamW& optimizer, FusedAdamW& policy_optimizer, Estimator& estimator,
                       at::Generator& data_gen);
  /// Whether this process writes files (one process, or rank 0 of a data-parallel run).
  bool primary() const;
  void save_pictures(int64_t step, const std::string& tag);
  /// Figure 4: each token's partner probabilities at the first layer (softmax of the policy's
  /// logits over the other tokens), averaged over the `logits`' inputs (n×T×T) and for the first
  /// two, as policy_heatmap_stepN.png.
  void save_policy_heatmap(const at::Tensor& logits, int64_t step);
  void progress(int64_t epoch, int64_t step, int64_t total_steps, double loss, double rho, int64_t depth,
                double images_per_s, double elapsed_s, bool final_line);

  Experiment& ex_;
  ResultsStore& store_;
  int64_t run_id_;
  std::string artifact_dir_;
  bool store_broken_ = false;  ///< the database is malformed: checkpoints are files only
  int64_t seed_;
  std::string label_;
  at::Generator generator_;
  int64_t eval_samples_;  ///< test samples each evaluation reads
  std::vector<Metric> reference_scores_;
  std::unique_ptr<EvalGraphs> eval_graphs_;  ///< runtime.cuda_graph's evaluation batches (eval_graph.h)
  TrainerOptions options_;
  int64_t resumed_from_ = 0;
};

}  // namespace htm
