// runtime.recompute = "blocks" (model/blocks.h): the blocks keep only their inputs and backward
// runs them again. The pass and its gradients are the ones kept activations give, the dropout
// masks included, the generator is where it would be, and a step holds less memory.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/experiment_config.h"
#include "kernels/kernels.h"
#include "model/blocks.h"
#include "plugins_util.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/memory.h"
#include "train/step.h"

namespace htm {
namespace {

Experiment trees(const std::string& dir, const std::string& recompute, int64_t dim = 32) {
  std::ofstream(dir + "/r.toml") << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 64\ntest_size = 16\n"
                                 << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
                                 << "[model]\ndim = " << dim << "\nheads = 2\nlayers = 4\ndropout = 0.2\n"
                                 << "[estimator]\nrollouts = 2\nbaseline = \"rloo\"\n"
                                 << "[train]\nbatch_size = 8\n"
                                 << "[runtime]\nthreads = 1\nrecompute = \"" << recompute << "\"\n";
  ExperimentFile file = ExperimentFile::load(dir + "/r.toml", {});
  return assemble(file.resolve(file.variants()[0], htm::testing::plugins()), htm::testing::plugins(), 0);
}

struct Result {
  std::vector<torch::Tensor> grads;
  torch::Tensor generator_after;
};

// One training step's gradients (the trainer's own: rollouts, losses, estimator, backward).
Result step(Experiment& ex) {
  ex.model->train();
  torch::manual_seed(7);  // the dropout masks' seeds come from the global generator
  StepRequest request;
  request.batch = ex.dataset->get(Split::train, torch::arange(8));
  request.batch_rows = 8;
  request.schedule = ex.schedule;
  TrainStep train_step(ex, at::make_generator<at::CPUGeneratorImpl>(3));
  train_step.gradients(request);
  Result r;
  for (const auto& p : ex.model->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().clone() : p.grad());
  r.generator_after = at::detail::getDefaultCPUGenerator().get_state();
  return r;
}

// With each kernel set: their dropout masks are all drawn from seeds of the global generator.
TEST(Recompute, TheBlocksGradientsAreThoseOfKeptActivationsAndTheGeneratorEndsWhereItWould) {
  const std::string dir = htm::testing::fresh_dir("recompute_same");
  for (const Kernels set : {Kernels::native, Kernels::portable, Kernels::gpu}) {
    if (set == Kernels::native && !native_kernels_built()) continue;
    KernelsScope scope(set);
    Experiment kept = trees(dir, "off"), again = trees(dir, "blocks");
    const Result a = step(kept), b = step(again);
    ASSERT_EQ(a.grads.size(), b.grads.size());
    int compared = 0;
    for (size_t i = 0; i < a.grads.size(); ++i) {
      ASSERT_EQ(a.grads[i].defined(), b.grads[i].defined()) << i;
      if (!a.grads[i].defined()) continue;
      EXPECT_TRUE(torch::allclose(a.grads[i], b.grads[i], 1e-5, 1e-7))
          << kernels_name(set) << " parameter " << i << ": most difference "
          << (a.grads[i] - b.grads[i]).abs().max().item<double>();
      compared += a.grads[i].abs().sum().item<double>() > 0;
    }
    EXPECT_GT(compared, 10) << "gradients reached the blocks";
    EXPECT_TRUE(torch::equal(a.generator_after, b.generator_after))
        << kernels_name(set) << ": the recomputation drew from the generator";
  }
}

// A block over tokens that carry no gradient (a parameter-free adapter's, say) keeps its
// activations: its parameters get their gradients either way.
TEST(Recompute, ABlockOverInputsWithoutGradientsStillTrainsItsParameters) {
  ModelOptions o;
  o.dim = 16;
  o.heads = 2;
  o.dropout = 0.0;
  TransformerBlock kept(o);
  o.recompute_blocks = true;
  TransformerBlock again(o);
  {
    torch::NoGradGuard no_grad;
    const auto from = kept->parameters(), to = again->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  for (const bool input_grad : {false, true}) {
    const torch::Tensor x = torch::randn({2, 5, 16}).requires_grad_(input_grad);
    kept->zero_grad();
    again->zero_grad();
    kept->forward(x).pow(2).sum().backward();
    again->forward(x).pow(2).sum().backward();
    const auto a = kept->parameters(), b = again->parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(b[i].grad().defined()) << "input gradient " << input_grad << ", parameter " << i;
      EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad(), 1e-5, 1e-7)) << input_grad << " " << i;
    }
  }
}

TEST(Recompute, AStepHoldsLessMemoryAndAPassWithoutGradientsIsUnchanged) {
  const std::string dir = htm::testing::fresh_dir("recompute_memory");
  Experiment kept = trees(dir, "off", 128), again = trees(dir, "blocks", 128);
  kept.model->train();
  again.model->train();
  const double peak_kept = step_peak_mib(kept, 32), peak_again = step_peak_mib(again, 32);
  EXPECT_LT(peak_again, 0.8 * peak_kept) << peak_again << " MiB against " << peak_kept;
  std::printf("[ recompute ] a step's heap peak %.1f MiB, %.1f with its blocks kept\n", peak_again, peak_kept);
  kept.model->eval();
  again.model->eval();
  torch::NoGradGuard no_grad;
  const Batch batch = kept.dataset->get(Split::test, torch::arange(8));
  auto out_kept = kept.model->forward(batch.input, kept.schedule, at::make_generator<at::CPUGeneratorImpl>(1)).output;
  auto out_again =
      again.model->forward(batch.input, again.schedule, at::make_generator<at::CPUGeneratorImpl>(1)).output;
  EXPECT_TRUE(torch::equal(out_kept, out_again));
}

}  // namespace
}  // namespace htm
