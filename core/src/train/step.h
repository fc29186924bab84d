// One training step, the same for the trainer and `htm bench`, in four calls: forward (each
// input repeated for the estimator's rollouts, the model's pass, the losses) → objective (the
// estimator's surrogate for the draws, replay, the leaf classifier's probe) → backward → update
// (gradient norms, clip, the optimisers), and a small report. A data-parallel process's row
// shard and share of the batch are handled here, once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/metric.h"
#include "train/device_graph.h"
#include "train/estimator/estimator.h"
#include "train/estimator/replay.h"
#include "train/experiment.h"
#include "train/objective.h"
#include "train/optimizer.h"

namespace htm {

class Communicator;
class GradientReducer;

/// A data-parallel rank's share of a step's batch: its `rows` of `batch_rows` and the whole
/// batch's mean loss, from one sum over the ranks, which also tells whether any rank was asked
/// to stop (`stop_here` in, `*stop_anywhere` out).
BatchShare share_of_batch(Communicator& comm, const torch::Tensor& per_sample_loss, int64_t rows, int64_t batch_rows,
                          bool stop_here = false, bool* stop_anywhere = nullptr);

struct StepRequest {
  Batch batch;                    ///< this process's rows of the step's inputs (labels and tree with them)
  int64_t first = 0;              ///< data-parallel: where they start in the whole batch
  int64_t batch_rows = 0;         ///< data-parallel: the whole batch's inputs
  std::vector<int64_t> schedule;  ///< merges per layer run at this step
  int64_t epoch = 0;
  int64_t step = 0;             ///< steps done before this one
  bool teacher_forced = false;  ///< §3.2.2's pre-training pass instead of the sampled one
  bool log = false;             ///< gather metrics (the losses' terms, the policy's, gradient norms)
  bool stop_here = false;       ///< data-parallel: this process was asked to stop
};

struct StepReport {
  double loss = 0;  ///< the whole batch's mean loss (unless loss_later holds it)
  /// With TrainStep::read_loss_later(): the loss, its read to the host queued (device_graph.h);
  /// `loss` is then not set. A step whose metrics are read (logged) reads its loss too.
  LaterRead loss_later;
  std::vector<Metric> terms;           ///< with StepRequest::log: the batch's metrics, the whole batch's means
  std::vector<PendingMetric> pending;  ///< the pass's metrics until the step reads them into terms
  bool stop_anywhere = false;          ///< data-parallel: some process was asked to stop
};

class TrainStep {
 public:
  /// The optimisers (the policy's own with estimator.policy_lr), the estimator (with the
  /// experiment's value heads) and, with estimator.replay, the replay buffer. `generator` draws
  /// every decision; `comm` (data-parallel) sums gradients and shares the batch.
  TrainStep(Experiment& ex, at::Generator generator, Communicator* comm = nullptr);
  ~TrainStep();

  /// The learning rate of this step: the model's, and the policy's in proportion
  /// (estimator.policy_lr · lr / train.lr).
  void set_lr(double lr);
  /// One step. Its gradients stay in the parameters until the next step (or gradients()) begins,
  /// which drops them before its forward pass.
  StepReport operator()(const StepRequest& request);
  /// Whether the steps leave their loss for the caller to read later (StepReport::loss_later)
  /// instead of waiting for the device to read it: the trainer's, which reads it once the next
  /// step is under way. Off by default (`htm bench` times each step to its end).
  void read_loss_later(bool later) { loss_later_ = later; }
  /// A step without its update: forward, objective and backward leave in each parameter's
  /// gradient what the step would apply (the memory estimate measures this; train/memory.h).
  void gradients(const StepRequest& request);

  /// Called after the forward pass and its objective, and after backward (`htm bench` reads
  /// each phase's memory there; not in a step replayed from a CUDA graph).
  std::function<void()> phase_ended;
  /// runtime.cuda_graph: what the graphs did so far ("captured 1, replayed 9 steps, ..."); empty
  /// when it is off.
  std::string graph_summary() const;
  /// runtime.cuda_graph: the graph whose memory pool the step graphs share (null before the first
  /// capture, or without graphs), for other graphs of the run to share it too.
  DeviceGraph* graph_pool() const;

  FusedAdamW& optimizer() { return optimizer_; }
  FusedAdamW& policy_optimizer() { return policy_optimizer_; }
  Estimator& estimator() { return estimator_; }
  /// Data-parallel: the gradient buckets (null in one process).
  GradientReducer* reducer() { return reducer_.get(); }

 private:
  /// What the forward half of a step leaves for the backward half.
  struct Pass {
    Batch batch;               ///< the request's rows, each repeated estimator.rollouts times
    ForwardResult out;         ///< the model's pass over them
    torch::Tensor per_sample;  ///< each row's loss (the experiment's weighted losses)
    torch::Tensor reference;   ///< estimator.baseline = "policy": each row's loss under the baseline policy
    BatchShare share;          ///< data-parallel: this rank's part of the whole batch
  };
  /// Rollouts → the model's pass (a data-parallel rank keeps its row shard of the draws) → the
  /// losses, whose terms go to the report; with a policy baseline, the reference pass.
  Pass forward(const StepRequest& request, StepReport& report);
  /// The objective whose gradient trains model and policy: the estimator's surrogate for the
  /// pass's draws (paper eq. 4), an earlier draw replayed, the leaf probe; the policy's
  /// diagnostics go to the report.
  torch::Tensor objective(const StepRequest& request, const Pass& pass, StepReport& report);
  /// Gradients of `total`, summed over the ranks as they come (data-parallel).
  void backward(const torch::Tensor& total);
  /// Per-block gradient norms (logged steps), clipping, and both optimisers' steps.
  void update(const StepRequest& request, StepReport& report);
  /// One pass of the model over `batch`: the losses' layer rewrite, the estimator's pair errors
  /// and the anytime levels asked for; `replayed`: an earlier draw's merges to score again.
  /// Each row's loss under estimator.baseline_policy's merges: the same inputs and weights, a pass
  /// without gradients (a self-critical baseline).
  torch::Tensor reference_losses(const Batch& batch, const StepRequest& request);
  ForwardResult model_pass(const Batch& batch, const std::vector<int64_t>& schedule, const StepRequest& request,
                           bool teacher_forced, const std::vector<MergeDecision>* replayed = nullptr);

  /// The pass's metrics (report.pending) read into report.terms; data-parallel, summed over ranks.
  void read_terms(StepReport& report, const BatchShare& share);
  /// The step itself: forward, objective, backward, update, the loss read.
  StepReport eager_step(const StepRequest& request);
  /// runtime.cuda_graph = "on": the step replayed from the graph of its shape (a logged step has
  /// its own), captured after two eager steps of that shape; nothing (the caller steps eagerly)
  /// where the step cannot be replayed: teacher forcing, replay, a policy baseline,
  /// data-parallel, a loss that varies with the step, a failed capture (step_graph.cpp).
  std::optional<StepReport> replayed_step(const StepRequest& request);

  /// runtime.cuda_graph "on" or "eager": its state, and the ema baseline kept on the device.
  void start_graphs();
  /// Under runtime.cuda_graph: one draw of the run's generator seeds the device's for the step.
  void seed_step();

  struct Graphs;        ///< runtime.cuda_graph's state (step_graph.cpp)
  struct CapturedStep;  ///< one shape's graph, its inputs and outputs
  /// Captures `request`'s step into `c` (its kernels recorded, not run); false where the capture
  /// failed (said, and the run goes on without graphs).
  bool capture(CapturedStep& c, const StepRequest& request);
  /// Replays `c` on `request`'s batch, then the update: the step's report.
  StepReport replay(CapturedStep& c, const StepRequest& request);

  Experiment& ex_;
  at::Generator generator_;
  std::unique_ptr<Graphs> graphs_;
  bool capturing_ = false;  ///< a CUDA graph is being captured: nothing is read on the host
  bool loss_later_ = false;
  Communicator* comm_;
  FusedAdamW optimizer_, policy_optimizer_;
  Estimator estimator_;
  std::optional<ReplayBuffer> replay_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace htm
