// runtime.cuda_graph on the CPU: what a captured step relies on that a CPU can check. The gpu
// kernels under GraphDraws draw from the device's generator alone and, with fixed rounds, take
// the pairs the read-back rounds take, raising a flag where the rounds fall short; a run under
// "eager" (the graphs' draws without a graph) is the same run for the same seed; "on" without a
// GPU is refused. The capture and replay themselves need a GPU (scripts/gpu/check.sh).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "config/device.h"
#include "config/experiment_config.h"
#include "host_reads.h"
#include "htm/error.h"
#include "kernels/fused_linear.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "kernels/portable.h"
#include "plugins_util.h"
#include "test_util.h"
#include "train/device_graph.h"
#include "train/experiment.h"
#include "train/step.h"

namespace htm {
namespace {

// Caps the captured sampler's rounds for a scope (runtime.graph_rounds).
struct RoundsCap {
  explicit RoundsCap(int64_t cap) { set_graph_rounds_cap(cap); }
  ~RoundsCap() { set_graph_rounds_cap(0); }
};

TEST(StepGraph, FixedRoundsTakeTheReadBackRoundsPairsAndFlagAMatchingLeftUnfinished) {
  RoundsCap cap(24);  // fewer than 64 tokens' ⌊T/2⌋ = 32
  torch::manual_seed(3);
  auto logits = torch::randn({4, 64, 64});
  auto noise = -torch::empty({4, 64, 64}).exponential_().log();
  auto [src, dst] = gpu::match_pairs(logits, noise, 32);
  {
    GraphDraws draws(/*fixed_rounds=*/true);
    int64_t rounds = 0;
    auto [fs, fd] = gpu::match_pairs(logits, noise, 32, &rounds);
    EXPECT_EQ(rounds, graph_rounds(64));
    EXPECT_TRUE(torch::equal(fs, src) && torch::equal(fd, dst));
    auto flags = take_graph_flags();
    ASSERT_EQ(flags.size(), 1u);
    EXPECT_FALSE(flags[0].raised.item<bool>()) << flags[0].what;
  }
  // A chain whose every link outweighs the one before: each round matches only its last free
  // link, so 32 pairs take 32 rounds, more than the 24 the cap allows.
  auto chain = torch::full({1, 64, 64}, -1e9);
  for (int64_t i = 0; i + 1 < 64; ++i) chain[0][i][i + 1] = chain[0][i + 1][i] = static_cast<double>(i);
  GraphDraws draws(/*fixed_rounds=*/true);
  gpu::match_pairs(chain, torch::zeros_like(chain), 32);
  auto flags = take_graph_flags();
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_TRUE(flags[0].raised.item<bool>());
  EXPECT_NE(flags[0].what.find("24 rounds left tokens unmatched at T = 64"), std::string::npos) << flags[0].what;
  EXPECT_TRUE(take_graph_flags().empty());
  // ⌊T/2⌋ rounds always finish the matching (each matches at least the best pair left): the
  // rounds stop there at small T (Trees' 16 tokens, then 8, 4, 2), the chain's worst case included.
  EXPECT_EQ(graph_rounds(16), 8);
  EXPECT_EQ(graph_rounds(2), 1);
  EXPECT_EQ(graph_rounds(256), 24);
  {
    RoundsCap none(0);  // by default: ⌊T/2⌋, which always finish
    EXPECT_EQ(graph_rounds(256), 128);
    EXPECT_EQ(graph_rounds(49), 24);
    // The chain's 32 pairs in its 32 rounds, nothing to check: the pairs of the rounds read back.
    auto [all_src, all_dst] = gpu::match_pairs(chain, torch::zeros_like(chain), 32);
    EXPECT_TRUE(take_graph_flags().empty());
    GraphDraws read_back(/*fixed_rounds=*/false);
    auto [back_src, back_dst] = gpu::match_pairs(chain, torch::zeros_like(chain), 32);
    EXPECT_TRUE(torch::equal(all_src, back_src) && torch::equal(all_dst, back_dst));
  }
  set_graph_rounds_cap(24);
  // There the capture has nothing to check, so it raises no flag, and its pairs are the pairs of
  // the rounds read back.
  auto short_chain = chain.narrow(1, 0, 16).narrow(2, 0, 16).contiguous();
  auto [fixed_src, fixed_dst] = gpu::match_pairs(short_chain, torch::zeros_like(short_chain), 8);
  EXPECT_TRUE(take_graph_flags().empty());
  GraphDraws read_back(/*fixed_rounds=*/false);
  auto [read_src, read_dst] = gpu::match_pairs(short_chain, torch::zeros_like(short_chain), 8);
  EXPECT_TRUE(torch::equal(fixed_src, read_src) && torch::equal(fixed_dst, read_dst));
}

TEST(StepGraph, GraphDrawsComeFromTheDevicesGeneratorAloneAndRepeatAfterItsSeed) {
  auto run = at::make_generator<at::CPUGeneratorImpl>(11);
  auto untouched = at::make_generator<at::CPUGeneratorImpl>(11);
  auto like = torch::empty({3, 8, 8});
  torch::Tensor first, again;
  {
    GraphDraws draws;
    torch::manual_seed(5);
    first = torch::cat({gpu_backend().gumbel_like(like, run), gpu_backend().normal_like(like, run),
                        gpu_backend().dropout(like.fill_(1), 0.5, 0, 0)});
    torch::manual_seed(5);
    again = torch::cat({gpu_backend().gumbel_like(like, run), gpu_backend().normal_like(like, run),
                        gpu_backend().dropout(like.fill_(1), 0.5, 9, 9)});
  }
  EXPECT_TRUE(torch::equal(first, again)) << "the dropout's own stream is not read under GraphDraws";
  EXPECT_EQ(at::check_generator<at::CPUGeneratorImpl>(run)->random64(),
            at::check_generator<at::CPUGeneratorImpl>(untouched)->random64())
      << "the run's generator is not drawn from under GraphDraws";
  // Without GraphDraws each call draws its seed from the run's generator.
  auto a = gpu_backend().gumbel_like(like, run), b = gpu_backend().gumbel_like(like, run);
  EXPECT_FALSE(torch::equal(a, b));
}

// The tiny configs: noise images (mse), and Trees sets as experiments/htm/trees.toml's rloo_long
// trains them (the point-set loss's matching, the exact log-probability, four rollouts, RLOO).
const char* kTinyImages =
    "[dataset]\nplugin = \"noise\"\nchannels = 1\nsize = 8\ntrain_size = 32\ntest_size = 8\n"
    "[adapter]\nplugin = \"image\"\npatch = 2\nfourier_bands = 2\n[loss.mse]\n"
    "[model]\ndim = 16\nheads = 2\nlayers = 3\nmlp_ratio = 2\ndropout = 0.1\n";
// The tiny images without dropout, whose blocks may be recomputed under a graph (runtime.recompute).
std::string tiny_images_without_dropout() {
  std::string body = kTinyImages;
  return body.replace(body.find("dropout = 0.1"), 13, "dropout = 0.0");
}
const char* kRecompute = "recompute = \"blocks\"\n";
// Images wide enough for the gpu kernels to recompute their first MLPs under runtime.recompute =
// "mlp" (8·64 tokens × 512 hidden: 1 MiB), at dropout 0.1: nothing in an MLP is drawn.
std::string wide_images() {
  std::string body = kTinyImages;
  body.replace(body.find("size = 8"), 8, "size = 16");
  return body.replace(body.find("dim = 16"), 8, "dim = 128").replace(body.find("mlp_ratio = 2"), 13, "mlp_ratio = 4");
}
const char* kRecomputeMlps = "recompute = \"mlp\"\n";

std::string tiny_trees(int64_t tokens, const std::string& policy = "learned") {
  return "[dataset]\nplugin = \"trees\"\ntokens = " + std::to_string(tokens) +
         "\ntrain_size = 32\ntest_size = 8\n[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
         "[model]\ndim = 16\nheads = 2\nlayers = 3\nmlp_ratio = 2\nmerge_fraction = 1.0\n"
         "[policy]\nplugin = \"" +
         policy +
         "\"\n"
         "[estimator]\nlog_prob = \"exact\"\nreward = \"sample\"\nbaseline = \"rloo\"\nrollouts = 4\n";
}

// Steps of a tiny model (`body`: dataset to estimator) under runtime.cuda_graph = `mode` on
// `device`: each step's loss and a logged step's metrics after it, and what the graphs did.
std::vector<double> losses(const std::string& dir, const std::string& mode, uint64_t seed,
                           const std::string& device = "cpu", int64_t steps = 3, std::string* graphs = nullptr,
                           const std::string& body = kTinyImages, const std::string& runtime = "") {
  const std::string path = dir + "/tiny.toml";
  std::ofstream(path) << "[experiment]\nname = \"graph\"\n"
                      << body << "[train]\nbatch_size = 8\ncheckpoint = false\n"
                      << "[runtime]\nthreads = 1\nkernels = \"gpu\"\ncuda_graph = \"" << mode << "\"\n"
                      << "device = \"" << device << "\"\n"
                      << runtime;
  KernelsScope kernels(Kernels::gpu);  // what htm run sets from runtime.kernels (an earlier test may have set another)
  ExperimentFile experiment = ExperimentFile::load(path, {});
  const ResolvedConfig config = experiment.resolve(experiment.variants()[0], htm::testing::plugins());
  RecomputeMlpsScope mlps(config.settings.runtime.recompute == RuntimeRecompute::mlp);  // as htm run sets it
  torch::manual_seed(0);
  Experiment ex = assemble(config, htm::testing::plugins(), 0);
  TrainStep step(ex, at::make_generator<at::CPUGeneratorImpl>(seed));
  ex.model->train();
  std::vector<double> out;
  for (int64_t k = 0; k < steps; ++k) {
    StepRequest request;
    request.batch = on_device(ex.dataset->get(Split::train, torch::arange(k % 4 * 8, (k % 4 + 1) * 8)), ex.device);
    request.batch_rows = 8;
    request.schedule = ex.schedule;
    request.step = k;
    request.log = k % 3 == 2;  // every third step logged: those have a graph of their own
    const StepReport report = step(request);
    out.push_back(report.loss);
    for (const auto& term : report.terms) out.push_back(term.value);  // its metrics, in order
  }
  if (graphs != nullptr) *graphs = step.graph_summary();
  return out;
}

// A stand-in for a CUDA graph on the CPU: it runs the work a capture would record, and refuses it
// as CUDA refuses a capture that reads a device value on the host or copies between them: every
// .item() and .to(device) htm's code calls (outside any torch op). A replay does nothing: the steps
// after a capture are not computed, so only what the capture ran is checked. Not seen on a CPU:
// data_ptr reads, and torch's own reads inside an op, which depend on its version and device
// (1.13's CPU one_hot and repeat_interleave read; 2.x's CUDA ones, captured in lease 5, do not).
// check.sh's capture on a GPU sees all of them (host_reads.h).
class HostReadProbe final : public DeviceGraph {
 public:
  void eager(const std::function<void()>& work) override { work(); }
  void capture(const std::function<void()>& work, DeviceGraph*) override {
    HostReads reads;
    work();
    if (reads.count > 0)
      throw Error("the step could not be captured: " + std::to_string(reads.count) +
                  " reads or copies between host and device");
  }
  void replay() override {}
};

// Runs a test's steps with the probe standing in for CUDA graphs.
class ProbedGraphs {
 public:
  ProbedGraphs() {
    set_device_graph_maker([](const c10::Device&) { return std::make_unique<HostReadProbe>(); });
  }
  ~ProbedGraphs() { set_device_graph_maker({}); }
};

TEST(StepGraph, ACapturedStepReadsNothingOnTheHostForImagesOrTreesSetsThatTheDeviceMatches) {
  const std::string dir = htm::testing::fresh_dir("probe");
  ProbedGraphs probe;
  std::string graphs;
  // 2 warm-ups and a capture of the plain step (steps 0, 1, 3), and of the logged one (2, 5, 8).
  losses(dir, "on", 1, "cpu", 9, &graphs);
  EXPECT_NE(graphs.find("captured 2,"), std::string::npos) << "images: " << graphs;
  losses(dir, "on", 1, "cpu", 9, &graphs, tiny_trees(16));
  EXPECT_NE(graphs.find("captured 2,"), std::string::npos) << "Trees, 16 points: " << graphs;
  // Blocks recomputed in backward (no dropout: nothing to draw again), their backward in the capture.
  losses(dir, "on", 1, "cpu", 9, &graphs, tiny_images_without_dropout(), kRecompute);
  EXPECT_NE(graphs.find("captured 2,"), std::string::npos) << "recomputed blocks: " << graphs;
  losses(dir, "on", 1, "cpu", 9, &graphs, wide_images(), kRecomputeMlps);
  EXPECT_NE(graphs.find("captured 2,"), std::string::npos) << "recomputed MLPs: " << graphs;
  // The nearest and tome baselines' greedy pairs, found on the device (htm::greedy_disjoint_pairs).
  for (const std::string policy : {"nearest", "tome"}) {
    losses(dir, "on", 1, "cpu", 9, &graphs, tiny_trees(16, policy));
    EXPECT_NE(graphs.find("captured 2,"), std::string::npos) << "Trees, " << policy << ": " << graphs;
  }
  // 32 points are matched on the host: the capture is refused and says why.
  losses(dir, "on", 1, "cpu", 4, &graphs, tiny_trees(32));
  EXPECT_NE(graphs.find("captured 0,"), std::string::npos) << graphs;
  EXPECT_NE(graphs.find("N = 32 elements runs on the host"), std::string::npos) << graphs;
}

TEST(StepGraph, EagerModeIsTheSameRunForTheSameSeedAndOnIsRefusedWithoutAGpu) {
  const std::string dir = htm::testing::fresh_dir("run");
  const auto a = losses(dir, "eager", 1), b = losses(dir, "eager", 1), c = losses(dir, "eager", 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  try {
    losses(dir, "on", 1);
    FAIL() << "runtime.cuda_graph = \"on\" ran on a CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a GPU"), std::string::npos) << e.what();
  }
}

// A value read later is the value it was when the read was asked for, whatever the device is
// given after it: on a GPU its copy waits for the work queued before it (a chain of products, not
// waited for) and is done before the work queued after (a fill); on the CPU it is kept as it was.
TEST(LaterRead, ReadsTheValueAsItWasWhenAskedForOnTheCpuAndOnAGpu) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (cuda_usable()) devices.emplace_back(torch::kCUDA);
  for (const auto& device : devices) {
    const int64_t n = device.is_cpu() ? 64 : 2048;
    torch::manual_seed(1);
    const auto x0 = torch::randn({n, n}, torch::kDouble).to(device);  // float64: the read keeps no alias
    const auto w = (torch::randn({n, n}, torch::kDouble) * (2.0 / std::sqrt(static_cast<double>(n)))).to(device);
    const auto chain = [&] {
      auto x = x0;
      for (int k = 0; k < 30; ++k) x = torch::tanh(x.mm(w));
      return x.sum();
    };
    const double expected = chain().item<double>();
    ASSERT_GT(std::abs(expected), 1.0) << "the chain keeps its scale";
    auto sum = chain();  // queued, not waited for
    LaterRead later(sum);
    EXPECT_TRUE(later.pending());
    sum.fill_(-1.0);
    EXPECT_EQ(later.value(), expected) << device;
    EXPECT_FALSE(later.pending());
  }
}

// On a GPU (skipped where this libtorch has none or sees none): twelve steps captured and
// replayed give the losses and metrics of the same steps run eagerly with the graphs' draws, to
// float rounding (CUDA's gather and attention backward add in no fixed order, eager or not), for
// images, for Trees sets (matched on the device, four rollouts, RLOO), for images whose blocks
// are recomputed in backward (runtime.recompute = "blocks", no dropout) and for wider ones whose
// MLPs are ("mlp", dropout 0.1). Every third step is
// logged: 8 steps of one graph (2 warm-ups, 6 replayed), 4 of the logged one (2 warm-ups, 2
// replayed).
TEST(StepGraph, OnAGpuTheReplayedStepsAreTheEagerOnes) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  const std::string dir = htm::testing::fresh_dir("cuda");
  for (const auto& [body, runtime] :
       std::vector<std::pair<std::string, std::string>>{{kTinyImages, ""},
                                                        {tiny_trees(16), ""},
                                                        {tiny_images_without_dropout(), kRecompute},
                                                        {wide_images(), kRecomputeMlps}}) {
    std::string graphs;
    const auto replayed = losses(dir, "on", 1, "cuda", 12, &graphs, body, runtime);
    const auto eager = losses(dir, "eager", 1, "cuda", 12, nullptr, body, runtime);
    ASSERT_EQ(replayed.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k)
      EXPECT_NEAR(replayed[k], eager[k], 1e-5 * std::abs(eager[k])) << "step " << k << "; " << graphs << "\n" << body;
    EXPECT_NE(graphs.find("captured 2, replayed 8 steps (0 done again eagerly), 4 eager"), std::string::npos)
        << graphs << "\n"
        << body;
  }
}

}  // namespace
}  // namespace htm
