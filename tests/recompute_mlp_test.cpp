// runtime.recompute = "mlp" (kernels/fused_linear.h): an MLP's body keeps its input alone and
// backward computes its hidden activation again. The values and gradients are the kept
// activations' bit for bit, with the native and the gpu kernels, in fp32 and bf16; it holds less;
// a whole training step is the same; and the setting is refused where it would do nothing.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/experiment_config.h"
#include "htm/error.h"
#include "kernels/fused_linear.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "plugins_util.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/memory.h"
#include "train/step.h"

namespace htm {
namespace {

// The kernels that take the setting on this build's CPU.
std::vector<Kernels> recomputing_kernels() {
  std::vector<Kernels> out{Kernels::gpu};
  if (native_kernels_built()) out.push_back(Kernels::native);
  return out;
}

TEST(RecomputeMlp, TheBodyGivesTheKeptActivationsValuesAndGradientsBitForBitAndHoldsLess) {
  for (const Kernels k : recomputing_kernels())
    for (const bool bf16 : {false, true}) {
      if (bf16 && k == Kernels::native && !cpu_has_bf16()) continue;  // oneDNN would emulate it
      const std::string what = kernels_name(k) + (bf16 ? " bf16" : " fp32");
      KernelsScope kernels(k);
      PrecisionScope precision(bf16 ? Precision::bf16 : Precision::fp32);
      torch::manual_seed(4);
      const auto leaf = [](std::vector<int64_t> sizes) { return torch::randn(sizes).requires_grad_(); };
      // x 16·64·256 values (1 MiB in fp32), the hidden activation 4 MiB: above the gpu kernels' 1 MiB.
      const std::vector<torch::Tensor> inputs{leaf({16, 64, 256}), leaf({256}),       leaf({256}), leaf({1024, 256}),
                                              leaf({1024}),        leaf({256, 1024}), leaf({256})};
      const auto upstream = torch::randn({16, 64, 256});
      std::vector<torch::Tensor> outputs, grads[2];
      double held[2];
      std::string node[2];
      for (int again = 0; again < 2; ++again) {
        RecomputeMlpsScope recompute(again == 1);
        for (const auto& t : inputs) t.mutable_grad() = torch::Tensor();
        AllocationLimit counting("test", {1e9, "test"});
        const auto y = norm_mlp(inputs[0], inputs[1], inputs[2], 1e-5, inputs[3], inputs[4], inputs[5], inputs[6]);
        held[again] = counting.counted_mib();
        node[again] = y.grad_fn()->name();
        y.backward(upstream);
        outputs.push_back(y.detach());
        for (const auto& t : inputs) grads[again].push_back(t.grad().clone());
      }
      EXPECT_NE(node[1].find("NormMlp"), std::string::npos) << what << ": " << node[1];
      EXPECT_EQ(node[0].find("NormMlp"), std::string::npos) << what << ": " << node[0];
      EXPECT_TRUE(torch::equal(outputs[0], outputs[1])) << what;
      for (size_t i = 0; i < inputs.size(); ++i)
        EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << what << ", input " << i;
      // The hidden activation kept apart is 4 MiB in fp32 (the gpu kernels keep it in fp32 in bf16 too).
      EXPECT_LT(held[1], held[0] - 3.5) << what << ": " << held[1] << " MiB against " << held[0];
      std::printf("[ mlp ] %s: %.3f MiB held until backward, %.3f with the hidden activation kept\n", what.c_str(),
                  held[1], held[0]);
    }
}

// Off by default; without gradients, or below the gpu kernels' 1 MiB, the body is the two ends.
TEST(RecomputeMlp, ItIsOffByDefaultAndLeavesPassesWithoutGradientsAndSmallBodiesAlone) {
  EXPECT_FALSE(recompute_mlps());
  KernelsScope kernels(Kernels::gpu);
  RecomputeMlpsScope recompute(true);
  torch::manual_seed(5);
  const auto leaf = [](std::vector<int64_t> sizes) { return torch::randn(sizes).requires_grad_(); };
  const auto x = leaf({8, 64, 16}), nw = leaf({16}), nb = leaf({16}), w1 = leaf({64, 16}), b1 = leaf({64}),
             w2 = leaf({16, 64}), b2 = leaf({16});  // hidden 8·64·64 values: 128 KiB
  const std::string small = norm_mlp(x, nw, nb, 1e-5, w1, b1, w2, b2).grad_fn()->name();
  EXPECT_EQ(small.find("NormMlp"), std::string::npos) << small;
  const auto big = leaf({64, 64, 16});  // hidden 1 MiB
  const std::string fused = norm_mlp(big, nw, nb, 1e-5, w1, b1, w2, b2).grad_fn()->name();
  EXPECT_NE(fused.find("NormMlp"), std::string::npos) << fused;
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(norm_mlp(big, nw, nb, 1e-5, w1, b1, w2, b2).requires_grad());
}

// htm run and htm bench put the setting in force with the kernels (train/experiment.h).
TEST(RecomputeMlp, UseKernelsPutsItInForceAndTakesItOff) {
  const Kernels before = kernels();
  use_kernels(RuntimeKernels::gpu, RuntimeRecompute::mlp);
  EXPECT_TRUE(recompute_mlps());
  EXPECT_EQ(kernels(), Kernels::gpu);
  use_kernels(RuntimeKernels::gpu, RuntimeRecompute::blocks);
  EXPECT_FALSE(recompute_mlps());
  use_kernels(RuntimeKernels::portable, RuntimeRecompute::mlp);
  use_kernels(RuntimeKernels::portable);  // a command that trains nothing (htm sample)
  EXPECT_FALSE(recompute_mlps());
  set_kernels(before);
}

std::string mlp_trees_file(const std::string& dir, const std::string& runtime, int64_t dim = 32) {
  const std::string path = dir + "/m.toml";
  std::ofstream(path) << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 64\ntest_size = 16\n"
                      << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
                      << "[model]\ndim = " << dim << "\nheads = 2\nlayers = 4\ndropout = 0.2\n"
                      << "[estimator]\nrollouts = 2\nbaseline = \"rloo\"\n"
                      << "[train]\nbatch_size = 8\n"
                      << "[runtime]\nthreads = 1\n"
                      << runtime;
  return path;
}

// One training step's gradients (the trainer's own: rollouts, losses, estimator, backward).
std::vector<torch::Tensor> mlp_step_gradients(Experiment& ex) {
  ex.model->train();
  torch::manual_seed(7);  // the dropout masks' seeds come from the global generator
  StepRequest request;
  request.batch = ex.dataset->get(Split::train, torch::arange(8));
  request.batch_rows = 8;
  request.schedule = ex.schedule;
  TrainStep train_step(ex, at::make_generator<at::CPUGeneratorImpl>(3));
  train_step.gradients(request);
  std::vector<torch::Tensor> grads;
  for (const auto& p : ex.model->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : p.grad());
  return grads;
}

// A Trees step at width 256 (the first depth's MLPs have hidden activations of 1 MiB: the gpu
// kernels recompute three of them), dropout 0.2: the same gradients with the MLPs' activations
// made again in backward as with them kept.
TEST(RecomputeMlp, ATrainingStepHasTheKeptActivationsGradients) {
  const std::string dir = htm::testing::fresh_dir("recompute_mlp");
  const ExperimentFile file = ExperimentFile::load(mlp_trees_file(dir, "", 256), {});
  const ResolvedConfig config = file.resolve(file.variants()[0], htm::testing::plugins());
  for (const Kernels k : recomputing_kernels()) {
    KernelsScope kernels(k);
    std::vector<torch::Tensor> grads[2];
    for (int again = 0; again < 2; ++again) {
      RecomputeMlpsScope recompute(again == 1);
      Experiment ex = assemble(config, htm::testing::plugins(), 0);
      grads[again] = mlp_step_gradients(ex);
    }
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i) {
      ASSERT_EQ(grads[0][i].defined(), grads[1][i].defined()) << kernels_name(k) << ", parameter " << i;
      if (grads[0][i].defined())
        EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << kernels_name(k) << ", parameter " << i;
    }
  }
}

// "mlp" with the portable kernels would keep everything: refused where the file says it.
TEST(RecomputeMlp, ThePortableKernelsAreRefusedAtTheLineThatAsks) {
  const std::string dir = htm::testing::fresh_dir("recompute_mlp_portable");
  const std::string path = mlp_trees_file(dir, "kernels = \"portable\"\nrecompute = \"mlp\"\n");
  try {
    const ExperimentFile file = ExperimentFile::load(path, {});
    file.resolve(file.variants()[0], htm::testing::plugins());
    FAIL() << "recompute = \"mlp\" with the portable kernels was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("m.toml:22"), std::string::npos) << message;
    EXPECT_NE(message.find("needs the native or gpu kernels"), std::string::npos) << message;
  }
  // With the gpu kernels, a graph and dropout it is accepted (nothing in it is drawn).
  const ExperimentFile file =
      ExperimentFile::load(mlp_trees_file(dir, "kernels = \"gpu\"\nrecompute = \"mlp\"\ncuda_graph = \"eager\"\n"), {});
  EXPECT_NO_THROW(file.resolve(file.variants()[0], htm::testing::plugins()));
}

}  // namespace
}  // namespace htm
