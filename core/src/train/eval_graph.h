// runtime.cuda_graph for evaluation (train/eval_graph.cpp): an evaluation batch's pass, its losses
// and everything the host reads of it, captured once per policy and shape and replayed, so that
// a study's many evaluations (Trees: 3 policies x 4 batches at every epoch's end) cost a launch
// a batch instead of a thousand. Private to train/: the trainer owns one, evaluation.cpp uses it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "config/settings.h"
#include "htm/dataset.h"
#include "htm/policy.h"
#include "train/device_graph.h"

namespace htm {

/// One evaluation batch's results: computed on the device (reads, merges), then read on the host
/// at once (values).
struct EvalBatch {
  /// float64 on the device: [0] the summed reconstruction error or the count of right classes,
  /// [1] the leaf classifier's accuracy, then each loss term's mean, then (a capture) its checks.
  torch::Tensor reads;
  std::vector<std::string> terms;     ///< the loss terms' names, in reads' order
  std::vector<MergeDecision> merges;  ///< the pass's merges, where the data knows its trees
  bool reconstructed = false, classified = false, leaf = false;
  std::vector<double> values;  ///< reads, on the host
};

/// The evaluation batches of a run under runtime.cuda_graph = "on" (captured and replayed) or
/// "eager" (the same draws, no graph): either way each batch draws from the device's generator
/// seeded for that batch alone, as a captured step does, so the two modes evaluate alike.
class EvalGraphs {
 public:
  using Pass = std::function<EvalBatch(const Batch&)>;
  EvalGraphs(RuntimeCudaGraph mode, const c10::Device& device);

  /// `pass` on `batch` with the policy named `key` deciding, its draws seeded with `seed`, read
  /// on the host: replayed where this key and shape were captured (after two eager warm-ups);
  /// done again eagerly, with the same draws, where a replay's checks failed; eager for a key
  /// whose capture failed (said once on stderr). `pass` must read nothing but its batch.
  EvalBatch run(const std::string& key, const Batch& batch, uint64_t seed, const Pass& pass);
  /// The training step graphs' pool (TrainStep::graph_pool), which captures from now on share:
  /// a batch's results are read before any other graph runs, so one pool holds the larger of the
  /// two graphs' memory instead of both (null: the evaluation graphs share a pool of their own).
  void share_pool(DeviceGraph* pool) { shared_ = pool; }

  /// "captured 3, replayed 570 batches (0 done again eagerly), 6 eager", and each key that
  /// could not be captured, with why.
  std::string summary() const;

 private:
  struct Captured {
    std::unique_ptr<DeviceGraph> graph;
    int warmups = 0;
    bool ready = false;
    Batch inputs;  // the graph reads its batch here
    EvalBatch out;
    size_t flags = 0;  // the checks at the end of out.reads
  };
  using Key = std::pair<std::string, std::vector<int64_t>>;  // policy, input shape

  EvalBatch eager(const Batch& batch, uint64_t seed, const Pass& pass);
  bool capture(Captured& c, const std::string& key, const Batch& batch, const Pass& pass);

  RuntimeCudaGraph mode_;
  c10::Device device_;
  std::map<Key, Captured> graphs_;
  std::map<std::string, std::string> failures_;  // key → why it runs without graphs
  DeviceGraph* pool_ = nullptr;                  // the first graph captured: the others share its pool
  DeviceGraph* shared_ = nullptr;                // the step graphs', when there is one
  int64_t captured_ = 0, replayed_ = 0, redone_ = 0, eager_ = 0;
  std::vector<int64_t> nodes_;  // each capture's nodes, where the torch says
};

/// An EvalBatch's reads on the host (one read), into its values.
void read_on_host(EvalBatch& batch);

}  // namespace htm
