// runtime.cuda_graph: a training step captured once per shape as a CUDA graph and replayed, so a
// step's thousands of small launches cost one (docs/gpu.md); a logged step has its own graph,
// whose metrics are read after the replay. What a replay cannot do, the step does eagerly:
// teacher forcing, replay, a policy baseline, data-parallel ranks, a loss that varies with the
// step. Every step of such a run, replayed or not, draws as a graph does (kernels/graph_draws.h's
// GraphDraws): from the device's generator, seeded once a step by one draw of the run's
// generator, so a seed names the same run on the same device and a resumed run draws what it
// would have.
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>

#include <torch/torch.h>

#include "htm/error.h"
#include "kernels/graph_draws.h"
#include "train/device_graph.h"
#include "train/step.h"
#include "train/step_graph.h"

namespace htm {

namespace {
constexpr int kWarmups = 2;    // eager steps of a shape before its capture (cuBLAS, the allocator)
constexpr size_t kGraphs = 6;  // shapes captured at most (stochastic depth: one per depth drawn; logged steps)
}  // namespace

void TrainStep::start_graphs() {
  const RuntimeCudaGraph mode = ex_.config.settings.runtime.cuda_graph;
  if (mode == RuntimeCudaGraph::on && !make_device_graph(ex_.device))
    throw Error(
        "runtime.cuda_graph = \"on\" needs a GPU (runtime.device = \"cuda\") and a libtorch with CUDA "
        "graphs (docs/gpu.md); this run's device is " +
        ex_.device.str());
  graphs_ = std::make_unique<Graphs>(Graphs{mode, ex_.device});
  for (const auto& term : ex_.losses)
    if (mode == RuntimeCudaGraph::on && term.loss->varies_with_step())
      graphs_->failure = "the loss '" + term.name + "' changes with the step";
  if (ex_.config.settings.estimator.baseline == RewardBaseline::ema && comm_ == nullptr)
    estimator_.keep_baseline_on(ex_.device);
}

void TrainStep::seed_step() {
  graphs_->seed = next_seed(generator_);
  seed_device_generator(graphs_->device, graphs_->seed);
}

DeviceGraph* TrainStep::graph_pool() const { return graphs_ ? graphs_->pool : nullptr; }

std::string TrainStep::graph_summary() const {
  if (!graphs_) return "";
  if (graphs_->mode == RuntimeCudaGraph::eager) return "eager (the graphs' draws, no graph)";
  std::string s = "captured " + std::to_string(graphs_->captured) + describe_nodes(graphs_->nodes) + ", replayed " +
                  std::to_string(graphs_->replayed) + " steps (" + std::to_string(graphs_->redone) +
                  " done again eagerly), " + std::to_string(graphs_->eager) + " eager";
  if (!graphs_->failure.empty()) s += "; " + graphs_->failure + ": the run went on without graphs";
  return s;
}

std::optional<StepReport> TrainStep::replayed_step(const StepRequest& request) {
  Graphs& g = *graphs_;
  ++g.eager;                                                              // until replayed below
  if (g.mode == RuntimeCudaGraph::on && !g.failure.empty() && !g.told) {  // said at the first step
    g.told = true;
    std::fprintf(stderr, "htm: runtime.cuda_graph: %s; the run steps without graphs\n", g.failure.c_str());
  }
  if (g.mode != RuntimeCudaGraph::on || !g.failure.empty() || request.teacher_forced || replay_ || comm_ != nullptr ||
      estimator_.wants_reference())
    return std::nullopt;
  const Graphs::Key key{request.batch.input.sizes().vec(), request.schedule, request.log};
  auto found = g.steps.find(key);
  if (found == g.steps.end()) {
    if (g.steps.size() >= kGraphs) return std::nullopt;
    found = g.steps.emplace(key, CapturedStep{}).first;
    found->second.graph = make_device_graph(g.device);
  }
  CapturedStep& c = found->second;
  if (!c.ready && c.warmups < kWarmups) {  // on the side stream the capture will use
    ++c.warmups;
    StepReport report;
    GraphDraws draws;
    c.graph->eager([&] { report = eager_step(request); });
    return report;
  }
  if (!c.ready && !capture(c, request)) return std::nullopt;
  return replay(c, request);
}

bool TrainStep::capture(CapturedStep& c, const StepRequest& request) {
  Graphs& g = *graphs_;
  c.inputs = request.batch;
  c.inputs.input = request.batch.input.clone();
  if (c.inputs.labels.defined()) c.inputs.labels = request.batch.labels.clone();
  if (c.inputs.tree.defined()) c.inputs.tree = request.batch.tree.clone();
  StepRequest fixed = request;
  fixed.batch = c.inputs;
  take_graph_flags();
  try {
    GraphDraws draws(/*fixed_rounds=*/true);
    capturing_ = true;
    // The graphs share one memory pool: a replay's outputs are read (the loss, the metrics) and
    // used (the gradients) before any other graph is replayed.
    c.graph->capture(
        [&] {
          const torch::Tensor baseline = estimator_.device_baseline();  // for a step done again
          StepReport captured;
          const Pass pass = forward(fixed, captured);
          backward(objective(fixed, pass, captured));
          std::vector<torch::Tensor> reads{pass.per_sample.detach().mean()};
          for (const auto& f : take_graph_flags()) reads.push_back(f.raised), ++c.flags;
          for (const auto& m : captured.pending) reads.push_back(m.value), c.metrics.push_back(m.name);
          if (baseline.defined()) reads.insert(reads.end(), {baseline[0], baseline[1]});
          for (auto& r : reads) r = r.to(torch::kDouble);
          c.reads = torch::stack(reads);
        },
        g.pool);
    capturing_ = false;
  } catch (const Error& e) {
    capturing_ = false;
    g.pool = nullptr;
    take_graph_flags();
    g.failure = e.what();
    g.told = true;
    g.steps.clear();  // c with them
    std::fprintf(stderr, "htm: runtime.cuda_graph: %s; the run goes on without graphs\n", e.what());
    seed_device_generator(g.device, g.seed);  // the attempt advanced it: this step draws as it would have
    return false;
  }
  for (const auto& p : ex_.model->parameters()) c.grads.emplace_back(p, p.grad());
  c.ready = true;
  if (g.pool == nullptr) g.pool = c.graph.get();
  ++g.captured;
  g.nodes.push_back(c.graph->nodes());
  return true;
}

StepReport TrainStep::replay(CapturedStep& c, const StepRequest& request) {
  Graphs& g = *graphs_;
  for (auto [into, from] :
       {std::pair{c.inputs.input, request.batch.input}, std::pair{c.inputs.labels, request.batch.labels},
        std::pair{c.inputs.tree, request.batch.tree}})
    if (into.defined()) into.copy_(from);
  c.graph->replay();
  for (auto& [param, grad] : c.grads) param.mutable_grad() = grad;
  StepReport report;
  if (loss_later_ && c.flags == 0 && c.metrics.empty()) {  // nothing to decide on the host now
    report.loss_later = LaterRead(c.reads[0]);             // queued before the next replay rewrites it
  } else {
    const auto host = c.reads.cpu();  // host: the step's one read
    const double* value = host.data_ptr<double>();
    const size_t before = 1 + c.flags + c.metrics.size();  // where the baseline's value was put
    for (size_t k = 1; k <= c.flags; ++k)
      if (value[k] > 0) {  // the same step again, eagerly, same draws
        if (static_cast<size_t>(host.numel()) > before)
          estimator_.restore_baseline(value[before], value[before + 1] > 0);
        seed_device_generator(g.device, g.seed);
        ++g.redone;
        GraphDraws draws;
        return eager_step(request);
      }
    for (size_t k = 0; k < c.metrics.size(); ++k) report.terms.push_back({c.metrics[k], value[1 + c.flags + k]});
    report.loss = value[0];
  }
  update(request, report);  // a logged step's gradient norms, after its metrics (as an eager step)
  --g.eager, ++g.replayed;
  return report;
}

}  // namespace htm
