#include "train/trainer.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "board/run_board.h"
#include "dist/communicator.h"
#include "htm/error.h"
#include "train/baselines.h"
#include "train/estimator/estimator.h"
#include "train/eval_graph.h"
#include "train/memory.h"
#include "train/optimizer.h"
#include "train/schedules.h"
#include "train/step.h"

namespace htm {
namespace {

std::atomic<bool> g_interrupt{false};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string clock_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace

bool Trainer::primary() const { return options_.comm == nullptr || options_.comm->rank() == 0; }

void request_interrupt() { g_interrupt = true; }
bool interrupt_requested() { return g_interrupt; }
void reset_interrupt() { g_interrupt = false; }

Trainer::Trainer(Experiment& experiment, ResultsStore& store, int64_t run_id, std::string artifact_dir, int64_t seed,
                 std::string label)
    : Trainer(experiment, store, run_id, std::move(artifact_dir), seed, std::move(label), TrainerOptions{}) {}

Trainer::Trainer(Experiment& experiment, ResultsStore& store, int64_t run_id, std::string artifact_dir, int64_t seed,
                 std::string label, TrainerOptions options)
    : ex_(experiment),
      store_(store),
      run_id_(run_id),
      artifact_dir_(std::move(artifact_dir)),
      seed_(seed),
      label_(std::move(label)),
      generator_(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed))),
      eval_samples_(
          samples_limit(experiment.config.settings.train.eval_samples, experiment.dataset->size(Split::test))),
      options_(std::move(options)) {
  const RuntimeCudaGraph graphs = experiment.config.settings.runtime.cuda_graph;
  if (graphs != RuntimeCudaGraph::off) eval_graphs_ = std::make_unique<EvalGraphs>(graphs, experiment.device);
}

Trainer::~Trainer() = default;

void Trainer::progress(int64_t epoch, int64_t step, int64_t total_steps, double loss, double rho, int64_t depth,
                       double images_per_s, double elapsed_s, bool final_line) {
  if (options_.verbosity == 0) return;
  static const bool tty = isatty(fileno(stderr));
  const double eta = step > 0 ? elapsed_s / step * (total_steps - step) : 0;
  std::fprintf(stderr, "%s[%s] epoch %lld step %lld/%lld loss %.5f rho %.2f depth %lld %.1f img/s ETA %s%s",
               tty ? "\r" : "", label_.c_str(), static_cast<long long>(epoch + 1), static_cast<long long>(step),
               static_cast<long long>(total_steps), loss, rho, static_cast<long long>(depth), images_per_s,
               clock_text(eta).c_str(), tty && !final_line ? "   " : "\n");
  std::fflush(stderr);
}

std::string describe(const RunTime& t) {
  char line[200];
  std::snprintf(line, sizeof line, "%s%lld steps %.1f s, %lld evaluation%s %.1f s, the rest %.1f s",
                t.resumed ? "(this process's part) " : "", static_cast<long long>(t.steps), t.step_seconds,
                static_cast<long long>(t.evaluations), t.evaluations == 1 ? "" : "s", t.evaluation_seconds,
                std::max(0.0, t.seconds - t.step_seconds - t.evaluation_seconds));
  return line;
}

// Where the loop stands, besides the checkpointed LoopState: the run's sizes, the data order's
// random stream, the one training step (the optimisers, the estimator, replay), the clocks.
struct Trainer::Loop {
  int64_t n_train = 0, batch_size = 0, steps_per_epoch = 0, total_steps = 0, layers = 0;
  int64_t teacher_forced_steps = 0;  // §3.2.2's pre-training stage, if a loss asks for one
  at::Generator data_gen;
  std::unique_ptr<TrainStep> step;  // shared with `htm bench`
  LoopState state;
  // A step whose loss is still on its way to the host (TrainStep::read_loss_later), and its number.
  LaterRead pending_loss;
  int64_t pending_step = 0;
  bool stop_agreed = false;  // data-parallel: every rank stops at the same step
  Clock::time_point t0, last_checkpoint, last_heartbeat;
  double seconds_before = 0;  // training time before this process took over (a resumed run)
  double seconds() const { return seconds_before + seconds_since(t0); }
  RunTime time;  // where this process's time went (its total and `resumed` set at the end)
};

TrainSummary Trainer::run() {
  Loop loop = plan();
  TrainSummary summary;
  summary.reference = start(loop);
  try {  // a malformed database stops the run at a checkpoint, and nothing more is written to it
    while (next_batch(loop)) {
      const bool epoch_end = train_batch(loop);
      after_batch(loop, epoch_end);
    }
    settle(loop);
    board_phase(BoardPhase::finishing);
  } catch (const DatabaseCorrupt&) {
    store_broken_ = true;
    if (ex_.config.settings.train.checkpoint) checkpoint(loop);
    throw;
  }
  const int64_t step = loop.state.step;
  log_policy_spread(step, ex_.config.settings.train.epochs - 1);
  save_pictures(step, "final");
  summary.test_mse = loop.state.test_mse;
  summary.accuracy = loop.state.accuracy;
  summary.steps = step;
  summary.seconds = loop.seconds();
  summary.time = loop.time;
  summary.time.seconds = loop.seconds() - loop.seconds_before;
  summary.time.resumed = loop.seconds_before > 0;
  summary.images_per_s = loop.state.images / std::max(1e-9, summary.seconds);
  summary.graphs = loop.step->graph_summary();
  if (const std::string evaluation = eval_graphs_ ? eval_graphs_->summary() : ""; !evaluation.empty())
    summary.graphs += "; evaluation: " + evaluation;
  return summary;
}

Trainer::Loop Trainer::plan() {
  const TrainSettings& train = ex_.config.settings.train;
  if (primary()) std::filesystem::create_directories(artifact_dir_);
  Loop loop;
  loop.n_train = samples_limit(train.train_samples, ex_.dataset->size(Split::train));
  loop.batch_size = train.batch_size;
  loop.steps_per_epoch = (loop.n_train + loop.batch_size - 1) / loop.batch_size;
  loop.total_steps = samples_limit(train.max_steps, train.epochs * loop.steps_per_epoch);
  loop.layers = static_cast<int64_t>(ex_.schedule.size());
  loop.data_gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 1);
  Communicator* comm = options_.comm;
  if (comm != nullptr) {  // every rank needs at least one row of every batch
    const int64_t remainder = loop.n_train % loop.batch_size;
    const int64_t smallest = remainder != 0 ? remainder : loop.batch_size;  // the last batch
    if (smallest < comm->world())
      throw Error("data-parallel training over " + std::to_string(comm->world()) +
                  " processes needs at least one sample "
                  "per process in every batch; the smallest batch of this run has " +
                  std::to_string(smallest) + " (train.batch_size " + std::to_string(loop.batch_size) +
                  ", train.train_samples " + std::to_string(loop.n_train) + ")");
  }
  loop.step = std::make_unique<TrainStep>(ex_, generator_, comm);
  loop.step->read_loss_later(true);
  return loop;
}

BaselineScores Trainer::start(Loop& loop) {
  board_phase(BoardPhase::references);
  const BaselineScores reference =
      baseline_scores(*ex_.dataset, *ex_.model, loop.n_train, eval_samples_, ex_.latent_floats);
  // The references' buffers (PCA in fp64) and the memory estimate's go back to the system: glibc
  // keeps freed blocks in its arenas, where training's, of other sizes, mostly do not fit, and
  // the peaks would add up.
  malloc_trim(0);
  LoopState& state = loop.state;
  TrainStep& step = *loop.step;
  if (options_.resume &&
      load_checkpoint(state, step.optimizer(), step.policy_optimizer(), step.estimator(), loop.data_gen)) {
    store_.truncate_after(run_id_, state.step);  // what was logged after the checkpoint comes again
    resumed_from_ = state.step;
    if (options_.verbosity > 0)
      std::fprintf(stderr, "[%s] resumed from its checkpoint at step %lld of %lld\n", label_.c_str(),
                   static_cast<long long>(state.step), static_cast<long long>(loop.total_steps));
  } else {
    if (options_.resume) store_.truncate_after(run_id_, -1);  // nothing to continue: start over
    std::vector<Metric> first = {{"baseline_mse", reference.mean_mse},
                                 {"parameters", static_cast<double>(ex_.parameters)},
                                 {"participating_parameters", static_cast<double>(ex_.participating)}};
    if (!std::isnan(reference.pca_mse)) {
      first.push_back({"baseline/pca_mse", reference.pca_mse});
      first.push_back({"baseline/pca_components", static_cast<double>(reference.pca_components)});
    }
    if (!std::isnan(reference.linear_accuracy))
      first.push_back({"baseline/linear_accuracy", reference.linear_accuracy});
    store_.log_metrics(run_id_, 0, 0, "test", first);
  }
  if (options_.comm != nullptr) {  // rank 0's weights everywhere (the same seed built the same ones; now it is certain)
    torch::NoGradGuard no_grad;
    for (auto& p : ex_.model->parameters()) {
      auto value = p.detach();
      options_.comm->broadcast(value);
    }
  }
  if (options_.verbosity > 0)
    std::fprintf(stderr, "[%s] model: %lld parameters, %lld of them trained by this objective\n", label_.c_str(),
                 static_cast<long long>(ex_.parameters), static_cast<long long>(ex_.participating));
  for (const auto& term : ex_.losses)
    if (term.weight != 0)
      loop.teacher_forced_steps = std::max(loop.teacher_forced_steps, term.loss->teacher_forced_steps());
  ex_.model->train();
  loop.t0 = loop.last_checkpoint = loop.last_heartbeat = Clock::now();
  loop.seconds_before = state.seconds;
  return reference;
}

bool Trainer::next_batch(Loop& loop) {
  LoopState& state = loop.state;
  if (state.step >= loop.total_steps) return false;
  if (state.batch == loop.steps_per_epoch) {  // the epoch is done
    ++state.epoch;
    state.batch = 0;
  }
  if (state.epoch >= ex_.config.settings.train.epochs) return false;
  if (state.batch == 0) {  // ---- epoch set-up
    state.order = torch::randperm(ex_.dataset->size(Split::train), loop.data_gen).narrow(0, 0, loop.n_train);
    state.epoch_loss = 0;
    state.epoch_batches = 0;
  }
  return true;
}

bool Trainer::train_batch(Loop& loop) {
  const TrainSettings& train = ex_.config.settings.train;
  Communicator* comm = options_.comm;
  LoopState& state = loop.state;
  int64_t& step = state.step;
  const int64_t epoch = state.epoch, b = state.batch;
  if (comm != nullptr ? loop.stop_agreed : interrupt_requested()) {  // between two steps: the state is whole, keep it
    if (train.checkpoint && step > resumed_from_) checkpoint(loop);
    throw Interrupted();
  }
  const auto step_t0 = Clock::now();
  board_step(step + 1, loop.total_steps);  // what a supervisor names if this process dies in the step
  // ---- learning rate and ρ for this step
  const double lr = lr_at(train, step, epoch, loop.total_steps);
  loop.step->set_lr(lr);
  const double rho = rho_for(train, step, epoch, loop.total_steps);
  // ---- the step, at a sampled depth of the stochastic merging schedule
  // (a teacher-forced stage trains every layer at once, so it uses the full schedule)
  StepRequest request;
  request.teacher_forced = step < loop.teacher_forced_steps;
  const int64_t depth = loop.layers == 0 ? 0
                        : request.teacher_forced || !train.stochastic_depth
                            ? loop.layers
                            : sample_depth(rho, loop.layers, generator_);
  request.schedule.assign(ex_.schedule.begin(), ex_.schedule.begin() + depth);
  const int64_t B = std::min(loop.batch_size, loop.n_train - b * loop.batch_size);  // the whole batch's inputs
  auto indices = state.order.narrow(0, b * loop.batch_size, B);
  const auto [first, rows] =
      comm != nullptr ? rows_of_rank(B, comm->rank(), comm->world()) : std::pair<int64_t, int64_t>{0, B};
  {
    PluginScope scope(PluginKind::dataset, ex_.dataset.get(), "get");
    request.batch = on_device(ex_.dataset->get(Split::train, indices.narrow(0, first, rows)), ex_.device);
  }
  request.first = first;
  request.batch_rows = B;
  request.epoch = epoch;
  request.step = step;
  request.log = (step + 1) % std::max<int64_t>(1, train.log_every) == 0 || step + 1 == loop.total_steps;
  request.stop_here = comm != nullptr && interrupt_requested();
  StepReport report;
  try {
    report = (*loop.step)(request);
  } catch (...) {
    settle(loop);  // a step before this one that diverged is the first to name
    throw;
  }
  if (comm != nullptr) loop.stop_agreed = report.stop_anywhere;

  // ---- bookkeeping
  ++step;
  ++state.batch;
  state.images += B;
  settle(loop);  // the step before: its loss read now that this one is under way
  const double step_seconds = seconds_since(step_t0);
  loop.time.step_seconds += step_seconds;
  board_step_seconds(step_seconds);  // the watchdog's patience grows with the slowest step
  ++loop.time.steps;
  const double step_ips = B / std::max(1e-9, step_seconds);
  state.images_per_s = step == 1 ? step_ips : 0.9 * state.images_per_s + 0.1 * step_ips;
  const bool epoch_end = state.batch == loop.steps_per_epoch || step == loop.total_steps;
  if (report.loss_later.pending() && !request.log) {  // read at the next step, or before what needs it
    loop.pending_loss = std::move(report.loss_later);
    loop.pending_step = step;
    return epoch_end;
  }
  const double loss_value = report.loss_later.pending() ? report.loss_later.value() : report.loss;
  account(loop, loss_value, step);
  if (request.log) {
    std::vector<Metric>& terms = report.terms;
    terms.push_back({"loss", loss_value});
    terms.push_back({"rho", rho});
    terms.push_back({"depth", static_cast<double>(depth)});
    terms.push_back({"images_per_s", state.images_per_s});
    terms.push_back({"lr", lr});
    store_.log_metrics(run_id_, step, epoch, "train", terms);
    progress(epoch, step, loop.total_steps, state.running_loss, rho, depth, state.images_per_s, loop.seconds(),
             step == loop.total_steps);
  }
  return epoch_end;
}

void Trainer::settle(Loop& loop) {
  if (loop.pending_loss.pending()) account(loop, loop.pending_loss.value(), loop.pending_step);
}

void Trainer::account(Loop& loop, double loss, int64_t step) {
  LoopState& state = loop.state;
  if (!std::isfinite(loss))
    throw Error("training diverged at step " + std::to_string(step) + ": the loss is " + std::to_string(loss));
  state.epoch_loss += loss;
  ++state.epoch_batches;
  state.running_loss = step == 1 ? loss : 0.9 * state.running_loss + 0.1 * loss;
}

void Trainer::after_batch(Loop& loop, bool epoch_end) {
  const TrainSettings& train = ex_.config.settings.train;
  const RuntimeSettings& runtime = ex_.config.settings.runtime;
  const int64_t step = loop.state.step, epoch = loop.state.epoch;
  const bool eval_now = train.eval_every > 0 && step % train.eval_every == 0 && step != loop.total_steps;
  if (loop.time.steps == 1) keep_freed_memory();  // this process's first step has run (train/memory.h)
  if (eval_now || epoch_end) settle(loop);        // the epoch's loss, and a divergence, before evaluating
  if (eval_now) log_eval(loop, step, epoch);
  if (epoch_end) {  // ---- evaluation at the full schedule
    store_.log_metrics(run_id_, step, epoch, "train",
                       {{"epoch_loss", loop.state.epoch_loss / std::max<int64_t>(1, loop.state.epoch_batches)}});
    if (!eval_now) log_eval(loop, step, epoch);
    if (runtime.pictures_every > 0 && (epoch + 1) % runtime.pictures_every == 0 && step != loop.total_steps)
      save_step_pictures(step);  // the run's end draws its own
  }
  // ---- checkpoint: at each epoch's end and at the runtime's interval
  const bool interval =
      (runtime.checkpoint_every > 0 && step % runtime.checkpoint_every == 0) ||
      (runtime.checkpoint_minutes > 0 && seconds_since(loop.last_checkpoint) >= 60 * runtime.checkpoint_minutes);
  if (train.checkpoint && (epoch_end || interval)) checkpoint(loop);
  if (seconds_since(loop.last_heartbeat) >= 10) {  // the claim on this run stays ours
    store_.heartbeat(run_id_);
    loop.last_heartbeat = Clock::now();
  }
  if (options_.after_step) {
    settle(loop);
    options_.after_step(step);
  }
}

void Trainer::log_eval(Loop& loop, int64_t step, int64_t epoch) {
  PhaseScope phase(BoardPhase::evaluating);
  const auto eval_t0 = Clock::now();
  if (eval_graphs_) eval_graphs_->share_pool(loop.step->graph_pool());
  Eval e = evaluate();
  loop.time.evaluation_seconds += seconds_since(eval_t0);
  ++loop.time.evaluations;
  std::vector<Metric> m = e.metrics;
  if (!std::isnan(e.mse)) m.push_back({"mse", e.mse});
  if (!std::isnan(e.accuracy)) m.push_back({"accuracy", e.accuracy});
  store_.log_metrics(run_id_, step, epoch, "test", m);
  if (options_.verbosity >= 2) {
    std::string scores;
    for (const auto& metric : m)
      if (metric.name == "mse" || metric.name == "accuracy" || metric.name == "cluster_f1" ||
          metric.name == "sibling_f1")
        scores += (scores.empty() ? "" : ", ") + metric.name + " " + std::to_string(metric.value);
    std::fprintf(stderr, "\n[%s] evaluation at step %lld: %s\n", label_.c_str(), static_cast<long long>(step),
                 scores.c_str());
  }
  loop.state.test_mse = e.mse;
  loop.state.accuracy = e.accuracy;
}

void Trainer::checkpoint(Loop& loop) {
  PhaseScope phase(BoardPhase::checkpointing);
  settle(loop);  // the state written is the steps' whole state
  loop.state.seconds = loop.seconds();
  TrainStep& step = *loop.step;
  save_checkpoint(loop.state, step.optimizer(), step.policy_optimizer(), step.estimator(), loop.data_gen);
  loop.last_checkpoint = Clock::now();
}

}  // namespace htm
