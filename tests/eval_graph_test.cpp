// runtime.cuda_graph's evaluation batches (train/eval_graph.h) on the CPU: a stand-in graph that
// replays by running the captured work again checks what a CUDA graph's replay relies on: the
// captured work reads nothing on the host, reads nothing but its graph's batch, and evaluates
// what "eager" (the graphs' draws, no graph) evaluates, policy by policy. A GPU's capture and
// replay: EvalGraph.OnAGpu… (skipped here) and scripts/gpu/check.sh.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/device.h"
#include "config/experiment_config.h"
#include "host_reads.h"
#include "htm/error.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "plugins_util.h"
#include "store/results_store.h"
#include "test_util.h"
#include "train/device_graph.h"
#include "train/experiment.h"
#include "train/trainer.h"

namespace htm {
namespace {

// Captures run the work once, refusing host reads (as CUDA does) and a training step's work
// (which rebinds its gradients to the capture's: a rerun cannot stand in for that replay, so the
// steps go on eagerly, with the graphs' draws); a replay runs the kept work again, drawing as
// the capture drew.
class Rerun final : public DeviceGraph {
 public:
  explicit Rerun(int* replays) : replays_(replays) {}
  void eager(const std::function<void()>& work) override { work(); }
  void capture(const std::function<void()>& work, DeviceGraph*) override {
    if (torch::GradMode::is_enabled()) throw Error("the stand-in replays evaluations only");
    HostReads reads;
    work();
    if (reads.count > 0)
      throw Error("the evaluation could not be captured: " + std::to_string(reads.count) +
                  " reads or copies between host and device");
    work_ = work;
    nodes_ = reads.dispatched;
  }
  int64_t nodes() const override { return nodes_; }
  void replay() override {
    GraphDraws draws(/*fixed_rounds=*/true);
    work_();
    ++*replays_;
  }

 private:
  std::function<void()> work_;
  int* replays_;
  int64_t nodes_ = -1;
};

const char* kTinyImages =
    "[dataset]\nplugin = \"noise\"\nchannels = 1\nsize = 8\ntrain_size = 32\ntest_size = 40\n"
    "[adapter]\nplugin = \"image\"\npatch = 2\nfourier_bands = 2\n[loss.mse]\n"
    "[model]\ndim = 16\nheads = 2\nlayers = 3\nmlp_ratio = 2\ndropout = 0.1\n";
// Trees as trees.toml's rloo_long trains and scores them: 16 points, the learned policy, and
// the same weights evaluated under the oracle and random policies, every one with its sibling
// and cluster F1 against the true tree.
const char* kTinyTrees =
    "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 32\ntest_size = 40\n"
    "[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
    "[model]\ndim = 16\nheads = 2\nlayers = 4\nmlp_ratio = 2\nmerge_fraction = 1.0\n[policy]\nplugin = \"learned\"\n"
    "[estimator]\nlog_prob = \"exact\"\nreward = \"sample\"\nbaseline = \"rloo\"\nrollouts = 4\n";

struct Evaluated {
  std::vector<std::string> metrics;  // "step name value" of every test metric, in order
  std::string graphs;                // the run's summary of its graphs
};

// A tiny run of `body` under runtime.cuda_graph = `mode`: three epochs of 4 steps, each ending in an
// evaluation of 40 test samples in batches of 16 (two of 16, one of 8).
Evaluated evaluate(const std::string& dir, const std::string& mode, const std::string& body,
                   const std::string& train = "", const std::string& device = "cpu") {
  const std::string path = dir + "/" + mode + ".toml";
  std::ofstream(path) << "[experiment]\nname = \"eval\"\n"
                      << body << "[train]\nbatch_size = 8\nepochs = 3\neval_batch_size = 16\ncheckpoint = false\n"
                      << "images = 0\n"
                      << train << "[runtime]\nthreads = 1\nkernels = \"gpu\"\ncuda_graph = \"" << mode << "\"\n"
                      << "device = \"" << device << "\"\n";
  KernelsScope kernels(Kernels::gpu);
  ExperimentFile file = ExperimentFile::load(path, {});
  const ResolvedConfig config = file.resolve(file.variants()[0], htm::testing::plugins());
  ResultsStore store(dir + "/" + mode + ".sqlite");
  RunInfo info;
  info.experiment = "eval";
  info.variant = mode;
  info.config_toml = config.toml;
  info.config_hash = config.hash;
  torch::manual_seed(0);
  Experiment ex = assemble(config, htm::testing::plugins(), 0);
  Evaluated out;
  out.graphs = Trainer(ex, store, store.begin_run(info), dir + "/runs-" + mode, 0, mode).run().graphs;
  auto rows = store.query(
      "SELECT step, name, printf('%.17g', value) FROM metrics WHERE split = 'test' "
      "AND name NOT LIKE 'policy_%' ORDER BY step, name");
  for (const auto& row : rows.rows) out.metrics.push_back(row[0] + " " + row[1] + " " + row[2]);
  return out;
}

class EvalGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    set_device_graph_maker([this](const c10::Device&) { return std::make_unique<Rerun>(&replays); });
  }
  void TearDown() override { set_device_graph_maker({}); }
  int replays = 0;
};

// Images; Trees under three policies; Trees evaluated greedily (train.eval_greedy: the greedy,
// the sampled and, greedily, the random policy's, whose equal logits fall back to its own draw).
const std::vector<std::pair<std::string, std::string>> kBodies{
    {kTinyImages, ""},
    {kTinyTrees, "eval_policies = [\"oracle\", \"random\"]\n"},
    {kTinyTrees, "eval_greedy = true\neval_policies = [\"random\"]\n"}};

TEST_F(EvalGraph, ReplayedEvaluationsScoreWhatEagerOnesScoreForImagesAndTreesUnderEveryPolicy) {
  for (const auto& [body, train] : kBodies) {
    const std::string dir = htm::testing::fresh_dir("eval-graph");
    replays = 0;
    const Evaluated eager = evaluate(dir, "eager", body, train);
    const Evaluated on = evaluate(dir, "on", body, train);
    ASSERT_FALSE(eager.metrics.empty());
    EXPECT_EQ(on.metrics, eager.metrics) << on.graphs;
    // Per policy (three for Trees), three evaluations: the batches of 16 warm up twice, then are captured and
    // replayed 4 times; the batch of 8 warms up twice and is replayed once.
    const int keys = body == kTinyImages ? 1 : 3;
    // Each capture's nodes: the stand-in counts the torch ops its work called outside any other.
    std::printf("%s\n", on.graphs.c_str());
    EXPECT_NE(on.graphs.find("evaluation: captured " + std::to_string(2 * keys) + " ("), std::string::npos)
        << on.graphs;
    EXPECT_NE(on.graphs.find(" nodes), replayed " + std::to_string(5 * keys) + " batches (0 done again eagerly), " +
                             std::to_string(4 * keys) + " eager"),
              std::string::npos)
        << on.graphs;
    EXPECT_EQ(replays, 5 * keys);
    EXPECT_EQ(eager.graphs.find("evaluation"), std::string::npos) << eager.graphs;
  }
}

// On a GPU (skipped where this libtorch has none or sees none), with CUDA's graphs, the steps'
// included: the same evaluations as "eager", to float rounding (CUDA's atomic adds in backward add
// in no fixed order, so the weights evaluated may differ by as much); the hierarchy scores, which
// count discrete choices, are printed, not compared.
TEST(EvalGraphOnAGpu, ReplayedEvaluationsScoreWhatEagerOnesScore) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  for (const auto& [body, train] : kBodies) {
    const std::string dir = htm::testing::fresh_dir("eval-graph-cuda");
    const Evaluated eager = evaluate(dir, "eager", body, train, "cuda");
    const Evaluated on = evaluate(dir, "on", body, train, "cuda");
    ASSERT_EQ(on.metrics.size(), eager.metrics.size()) << on.graphs;
    for (size_t k = 0; k < on.metrics.size(); ++k) {
      const auto split = [](const std::string& m) {
        const auto space = m.rfind(' ');
        return std::pair{m.substr(0, space), std::stod(m.substr(space + 1))};
      };
      const auto [name, value] = split(on.metrics[k]);
      const auto [eager_name, eager_value] = split(eager.metrics[k]);
      ASSERT_EQ(name, eager_name);
      if (name.find("f1") != std::string::npos || name.find("sibling") != std::string::npos)
        std::printf("%s: replayed %.6f, eager %.6f\n", name.c_str(), value, eager_value);
      else
        EXPECT_NEAR(value, eager_value, 1e-4 * std::abs(eager_value) + 1e-7) << name << "; " << on.graphs;
    }
    const int keys = body == kTinyImages ? 1 : 3;
    std::printf("%s\n", on.graphs.c_str());  // with each capture's nodes where the torch says
    EXPECT_NE(on.graphs.find("evaluation: captured " + std::to_string(2 * keys)), std::string::npos) << on.graphs;
    EXPECT_NE(on.graphs.find(", replayed " + std::to_string(5 * keys) + " batches (0 done again eagerly)"),
              std::string::npos)
        << on.graphs;
  }
}

}  // namespace
}  // namespace htm
