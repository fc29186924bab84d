// Evaluation batches captured as CUDA graphs and replayed (train/eval_graph.h). The same shape of
// code as the training step's graphs (step_graph.cpp): warm-ups on the graph's side stream, one
// capture per key and shape, every read after the replay, a failed check done again eagerly.
#include "train/eval_graph.h"

#include <cstdio>

#include "htm/error.h"
#include "kernels/graph_draws.h"

namespace htm {

namespace {
constexpr int kWarmups = 2;     // eager batches of a key and shape before its capture
constexpr size_t kGraphs = 12;  // (policy, shape) pairs captured at most
}  // namespace

void read_on_host(EvalBatch& batch) {
  const auto host = batch.reads.to(torch::kCPU, torch::kDouble).contiguous();  // host: the batch's one read
  batch.values.assign(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

EvalGraphs::EvalGraphs(RuntimeCudaGraph mode, const c10::Device& device) : mode_(mode), device_(device) {}

EvalBatch EvalGraphs::eager(const Batch& batch, uint64_t seed, const Pass& pass) {
  seed_device_generator(device_, seed);
  GraphDraws draws;
  EvalBatch out = pass(batch);
  read_on_host(out);
  ++eager_;
  return out;
}

EvalBatch EvalGraphs::run(const std::string& key, const Batch& batch, uint64_t seed, const Pass& pass) {
  if (mode_ != RuntimeCudaGraph::on || failures_.count(key) > 0) return eager(batch, seed, pass);
  auto found = graphs_.find({key, batch.input.sizes().vec()});
  if (found == graphs_.end()) {
    if (graphs_.size() >= kGraphs) return eager(batch, seed, pass);
    found = graphs_.emplace(Key{key, batch.input.sizes().vec()}, Captured{}).first;
    found->second.graph = make_device_graph(device_);
  }
  Captured& c = found->second;
  if (!c.ready && c.warmups < kWarmups) {  // on the side stream the capture will use
    ++c.warmups;
    EvalBatch out;
    c.graph->eager([&] { out = eager(batch, seed, pass); });
    return out;
  }
  if (!c.ready && !capture(c, key, batch, pass)) return eager(batch, seed, pass);
  for (auto [into, from] : {std::pair{c.inputs.input, batch.input}, std::pair{c.inputs.labels, batch.labels},
                            std::pair{c.inputs.tree, batch.tree}})
    if (into.defined()) into.copy_(from);
  seed_device_generator(device_, seed);  // a replay draws from the generator as it stands
  c.graph->replay();
  EvalBatch out = c.out;
  read_on_host(out);
  for (size_t k = out.values.size() - c.flags; k < out.values.size(); ++k)
    if (out.values[k] > 0) {  // the same batch again, eagerly, same draws
      --eager_, ++redone_;
      return eager(batch, seed, pass);
    }
  out.values.resize(out.values.size() - c.flags);
  ++replayed_;
  return out;
}

bool EvalGraphs::capture(Captured& c, const std::string& key, const Batch& batch, const Pass& pass) {
  c.inputs = batch;
  for (auto* t : {&c.inputs.input, &c.inputs.labels, &c.inputs.tree})
    if (t->defined()) *t = t->clone();
  take_graph_flags();
  try {
    GraphDraws draws(/*fixed_rounds=*/true);
    // The work reads nothing but what lives as long as the graph: its batch, its results.
    c.graph->capture(
        [&c, pass] {
          c.out = pass(c.inputs);
          std::vector<torch::Tensor> checks{c.out.reads};
          for (const auto& f : take_graph_flags()) checks.push_back(f.raised.to(torch::kDouble).reshape({1}));
          c.flags = checks.size() - 1;
          c.out.reads = torch::cat(checks);
        },
        shared_ != nullptr ? shared_ : pool_);
  } catch (const Error& e) {
    take_graph_flags();
    graphs_.erase({key, batch.input.sizes().vec()});  // c with it
    const std::string why = e.what();
    failures_[key] = why;
    std::fprintf(stderr, "htm: runtime.cuda_graph: the evaluation under '%s': %s; it runs without graphs\n",
                 key.c_str(), why.c_str());
    return false;
  }
  c.ready = true;
  if (pool_ == nullptr) pool_ = c.graph.get();
  ++captured_;
  nodes_.push_back(c.graph->nodes());
  return true;
}

std::string EvalGraphs::summary() const {
  if (mode_ != RuntimeCudaGraph::on) return "";
  std::string s = "captured " + std::to_string(captured_) + describe_nodes(nodes_) + ", replayed " +
                  std::to_string(replayed_) + " batches (" + std::to_string(redone_) + " done again eagerly), " +
                  std::to_string(eager_) + " eager";
  for (const auto& [key, why] : failures_) s += "; '" + key + "' not captured: " + why;
  return s;
}

}  // namespace htm
