// runtime.recompute = "blocks" (model/blocks.h): the blocks keep only their inputs and backward
// runs them again. The pass and its gradients are the ones kept activations give, the dropout
// masks included, the generator is where it would be, and a step holds less memory. And the gpu
// kernels' MLP products, which compute gelu(h) and layer_norm(x) again in backward. And
// runtime.recompute = "mlp" (RecomputeMlp.*).
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/experiment_config.h"
#include "htm/error.h"
#include "htm/layers.h"
#include "kernels/fused_linear.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "model/blocks.h"
#include "plugins_util.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/memory.h"
#include "train/step.h"

namespace htm {
namespace {

Experiment trees(const std::string& dir, const std::string& recompute, int64_t dim = 32, double entropy = 0) {
  std::ofstream(dir + "/r.toml") << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 64\ntest_size = 16\n"
                                 << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
                                 << "[model]\ndim = " << dim << "\nheads = 2\nlayers = 4\ndropout = 0.2\n"
                                 << "[estimator]\nrollouts = 2\nbaseline = \"rloo\"\nentropy = " << entropy << "\n"
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

// The kernels that take the setting on this build's CPU.
std::vector<Kernels> recomputing_kernels() {
  std::vector<Kernels> out{Kernels::gpu};
  if (native_kernels_built()) out.push_back(Kernels::native);
  return out;
}

// `check(what)` under each fusing kernel set in fp32 and bf16 (the native kernels' bf16 only where
// oneDNN has the instructions: it would emulate it), `what` naming the setting.
template <class Check>
void for_each_fused_setting(Check&& check) {
  for (const Kernels k : recomputing_kernels())
    for (const bool bf16 : {false, true}) {
      if (bf16 && k == Kernels::native && !cpu_has_bf16()) continue;
      KernelsScope kernels(k);
      PrecisionScope precision(bf16 ? Precision::bf16 : Precision::fp32);
      check(kernels_name(k) + (bf16 ? " bf16" : " fp32"));
    }
}

torch::Tensor leaf(std::vector<int64_t> sizes) { return torch::randn(sizes).requires_grad_(); }

// `pass(choice)` over `inputs` for choice 0 and then 1, each followed by backward from `upstream`:
// expects the two passes' outputs and every input's gradient equal bit for bit, and returns the
// MiB each pass held until its backward.
std::array<double, 2> passes_agree(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& upstream,
                                   const std::function<std::vector<torch::Tensor>(int)>& pass,
                                   const std::string& what) {
  std::vector<torch::Tensor> outputs[2], grads[2];
  std::array<double, 2> held{};
  for (int choice = 0; choice < 2; ++choice) {
    for (const auto& t : inputs) t.mutable_grad() = torch::Tensor();
    AllocationLimit counting("test", {1e9, "test"});
    const auto out = pass(choice);
    held[choice] = counting.counted_mib();
    torch::autograd::backward(out, upstream);
    for (const auto& y : out) outputs[choice].push_back(y.detach());
    for (const auto& t : inputs) grads[choice].push_back(t.grad().clone());
  }
  for (size_t i = 0; i < outputs[0].size(); ++i)
    EXPECT_TRUE(torch::equal(outputs[0][i], outputs[1][i])) << what << ", output " << i;
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(torch::equal(grads[0][i], grads[1][i])) << what << ", input " << i;
  return held;
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

// The gpu kernels' gelu_linear and norm_linear keep their input alone (gelu(h) and the normalised
// tokens are computed again in backward): the unfused ops' values and gradients bit for bit, in
// fp32 and bf16, with one activation less held until backward.
TEST(Recompute, TheGpuKernelsProductsGiveTheUnfusedGradientsBitForBitAndHoldLess) {
  KernelsScope kernels(Kernels::gpu);
  auto product = [](const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& b, bool bf16) {
    if (!bf16) return torch::linear(a, w, b);
    return torch::linear(a.to(torch::kBFloat16), w.to(torch::kBFloat16), b.to(torch::kBFloat16)).to(torch::kFloat);
  };
  for (const bool bf16 : {false, true}) {
    PrecisionScope precision(bf16 ? Precision::bf16 : Precision::fp32);
    torch::manual_seed(2);
    // x is 16·64·256 values (1 MiB in fp32), h four times it: both at least the 1 MiB from
    // which the products compute them again.
    const std::vector<torch::Tensor> inputs{leaf({16, 64, 256}), leaf({256}),       leaf({256}), leaf({1024, 256}),
                                            leaf({1024}),        leaf({256, 1024}), leaf({256})};  // x, norm, fc1, fc2
    const auto &x = inputs[0], &nw = inputs[1], &nb = inputs[2], &w1 = inputs[3], &b1 = inputs[4], &w2 = inputs[5],
               &b2 = inputs[6];
    const auto held = passes_agree(
        inputs, {torch::randn({16, 64, 256})},
        [&](int fused) -> std::vector<torch::Tensor> {
          if (fused) return {gpu_backend().gelu_linear(gpu_backend().norm_linear(x, nw, nb, 1e-5, w1, b1), w2, b2)};
          return {product(torch::gelu(product(torch::layer_norm(x, {256}, nw, nb, 1e-5), w1, b1, bf16)), w2, b2, bf16)};
        },
        bf16 ? "bf16" : "fp32");
    // gelu(h) is 4 MiB in fp32 (kept as its bf16 copy in bf16: 2 MiB), the normalised tokens 1
    // (0.5 in bf16).
    EXPECT_LT(held[1], held[0] - (bf16 ? 2.5 : 4.5))
        << (bf16 ? "bf16: " : "fp32: ") << held[1] << " MiB against " << held[0];
    std::printf("[ products ] %s: %.3f MiB held until backward, %.3f unfused\n", bf16 ? "bf16" : "fp32", held[1],
                held[0]);
  }
}

// Below 1 MiB the activation is kept, not computed again: the products are the unfused ops
// themselves (one launch fewer in backward, where a small model's step is bound by its launches).
TEST(Recompute, TheGpuKernelsProductsKeepSmallActivations) {
  KernelsScope kernels(Kernels::gpu);
  torch::manual_seed(3);
  for (const int64_t rows : {8, 64}) {  // x 8·64·16 or 64·64·16 values, h four times it: 0.5 or 4 MiB
    auto x = leaf({rows, 64, 16}), nw = leaf({16}), nb = leaf({16}), w1 = leaf({64, 16}), b1 = leaf({64});
    auto w2 = leaf({16, 64}), b2 = leaf({16});
    const auto h = gpu_backend().norm_linear(x, nw, nb, 1e-5, w1, b1);
    const auto y = gpu_backend().gelu_linear(h, w2, b2);
    const std::string norm = h.grad_fn()->name(), gelu = y.grad_fn()->name();
    EXPECT_EQ(norm.find("NormLinear") != std::string::npos, false) << rows << ": " << norm;  // x ≤ 256 KiB
    EXPECT_EQ(gelu.find("GeluLinear") != std::string::npos, rows == 64) << rows << ": " << gelu;
  }
}

// Two products of one norm (a self-attention's queries and keys with values) keep x alone: the
// values and gradients of the norm and the two products apart, bit for bit (the normalised tokens'
// gradient is the sum of two, as autograd makes it), with the native and the gpu kernels, in fp32
// and bf16, holding the normalised tokens less.
TEST(Recompute, TwoProductsOfOneNormGiveTheOpsApartsGradientsBitForBitAndHoldLess) {
  for_each_fused_setting([](const std::string& what) {
    torch::manual_seed(6);
    // x 16·64·256 values: 1 MiB in fp32, from which the gpu kernels keep it alone.
    const std::vector<torch::Tensor> inputs{leaf({16, 64, 256}), leaf({256}),      leaf({256}), leaf({256, 256}),
                                            leaf({256}),         leaf({512, 256}), leaf({512})};
    const auto held = passes_agree(
        inputs, {torch::randn({16, 64, 256}), torch::randn({16, 64, 512})},
        [&](int fused) -> std::vector<torch::Tensor> {
          if (fused) {
            auto [y1, y2] =
                norm_linear2(inputs[0], inputs[1], inputs[2], 1e-5, inputs[3], inputs[4], inputs[5], inputs[6]);
            return {y1, y2};
          }
          const auto h = torch::layer_norm(inputs[0], {256}, inputs[1], inputs[2], 1e-5);
          return {linear(h, inputs[3], inputs[4]), linear(h, inputs[5], inputs[6])};
        },
        what);
    // The normalised tokens: 1 MiB in fp32 (the ops apart keep them once, or a bf16 copy per product).
    EXPECT_LT(held[1], held[0] - 0.9) << what << ": " << held[1] << " MiB against " << held[0];
    std::printf("[ norm ] %s: %.3f MiB held until backward, %.3f apart\n", what.c_str(), held[1], held[0]);
  });
}

// Without an entropy bonus (estimator.entropy = 0) a policy's entropy is a diagnostic: detached
// once reported, so its B×T×T intermediates are not held until backward; with one it keeps its
// graph. The gradients are the same either way where the bonus is 0 (GoldenModel, a Trees run).
TEST(Recompute, AnEntropyWithoutABonusKeepsNoGraph) {
  const std::string dir = htm::testing::fresh_dir("entropy_graph");
  for (const double bonus : {0.0, 0.1}) {
    Experiment ex = trees(dir, "off", 32, bonus);
    ex.model->train();
    const Batch batch = ex.dataset->get(Split::train, torch::arange(8));
    const auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1));
    int reported = 0;
    for (const auto& draw : out.draws) {
      if (!draw.entropy.defined()) continue;
      ++reported;
      EXPECT_EQ(draw.entropy.requires_grad(), bonus > 0) << "bonus " << bonus << ", depth " << draw.depth;
    }
    EXPECT_GT(reported, 0) << "the learned policy reports its entropy";
  }
}

// ---------------------------------------------------------------------------------------------
// runtime.recompute = "mlp" (kernels/fused_linear.h): an MLP's body keeps its input alone and
// backward computes its hidden activation again: the kept activations' values and gradients bit
// for bit, with the native and the gpu kernels, in fp32 and bf16; it holds less; a whole training
// step is the same; and the setting is refused where it would do nothing.

TEST(RecomputeMlp, TheBodyGivesTheKeptActivationsValuesAndGradientsBitForBitAndHoldsLess) {
  for_each_fused_setting([](const std::string& what) {
    torch::manual_seed(4);
    // x 16·64·256 values (1 MiB in fp32), the hidden activation 4 MiB: above the gpu kernels' 1 MiB.
    const std::vector<torch::Tensor> inputs{leaf({16, 64, 256}), leaf({256}),       leaf({256}), leaf({1024, 256}),
                                            leaf({1024}),        leaf({256, 1024}), leaf({256})};
    std::string node[2];
    const auto held = passes_agree(
        inputs, {torch::randn({16, 64, 256})},
        [&](int again) -> std::vector<torch::Tensor> {
          RecomputeMlpsScope recompute(again == 1);  // chosen in forward: the node it makes does backward
          const auto y = norm_mlp(inputs[0], inputs[1], inputs[2], 1e-5, inputs[3], inputs[4], inputs[5], inputs[6]);
          node[again] = y.grad_fn()->name();
          return {y};
        },
        what);
    EXPECT_NE(node[1].find("NormMlp"), std::string::npos) << what << ": " << node[1];
    EXPECT_EQ(node[0].find("NormMlp"), std::string::npos) << what << ": " << node[0];
    // The hidden activation kept apart is 4 MiB in fp32 (the gpu kernels keep it in fp32 in bf16 too).
    EXPECT_LT(held[1], held[0] - 3.5) << what << ": " << held[1] << " MiB against " << held[0];
    std::printf("[ mlp ] %s: %.3f MiB held until backward, %.3f with the hidden activation kept\n", what.c_str(),
                held[1], held[0]);
  });
}

// Off by default; without gradients, or below the gpu kernels' 1 MiB, the body is the two ends.
TEST(RecomputeMlp, ItIsOffByDefaultAndLeavesPassesWithoutGradientsAndSmallBodiesAlone) {
  EXPECT_FALSE(recompute_mlps());
  KernelsScope kernels(Kernels::gpu);
  RecomputeMlpsScope recompute(true);
  torch::manual_seed(5);
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

// A Sequential of LayerNorm, htm::Linear, GELU, htm::Linear (the image head, the unmerge scorer,
// the leaf head) through norm_mlp is its own forward: bit for bit where the norm is torch's (rows
// wider than 64, or kernels other than native), to rounding where the native kernels normalise
// narrow rows themselves (kernels/native/layer_norm.h); any other layout is refused.
TEST(RecomputeMlp, ASequentialBodyIsItsOwnForwardAndAnyOtherLayoutIsRefused) {
  torch::manual_seed(8);
  for (const int64_t C : {16, 96}) {
    torch::nn::Sequential mlp(torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})), Linear(C, 32), torch::nn::GELU(),
                              Linear(32, 3));
    const auto x = torch::randn({4, 64, C});
    for_each_fused_setting([&](const std::string& what) {
      const auto fused = norm_mlp(x, mlp), plain = mlp->forward(x);
      if (C > 64 || kernels() != Kernels::native)
        EXPECT_TRUE(torch::equal(fused, plain)) << what << " C=" << C;
      else
        EXPECT_TRUE(torch::allclose(fused, plain, 1e-4, 1e-5)) << what << ": " << (fused - plain).abs().max();
    });
  }
  torch::nn::Sequential mlp(torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})), Linear(16, 32), torch::nn::GELU(),
                            Linear(32, 3));
  const auto x = torch::randn({4, 64, 16});
  try {
    norm_mlp(x, torch::nn::Sequential(Linear(16, 32), torch::nn::GELU(), Linear(32, 3)));
    FAIL() << "a Sequential without its norm was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LayerNorm, htm::Linear, GELU, htm::Linear"), std::string::npos) << e.what();
  }
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

// A Trees step at width 256 (the first depth's MLPs have hidden activations of 1 MiB: the gpu
// kernels recompute three of them), dropout 0.2: the same gradients with the MLPs' activations
// made again in backward as with them kept.
TEST(RecomputeMlp, ATrainingStepHasTheKeptActivationsGradients) {
  const std::string dir = htm::testing::fresh_dir("recompute_mlp");
  for (const Kernels k : recomputing_kernels()) {
    KernelsScope kernels(k);
    std::vector<torch::Tensor> grads[2];
    for (int again = 0; again < 2; ++again) {
      RecomputeMlpsScope recompute(again == 1);  // what htm run sets from the file's "mlp"
      Experiment ex = trees(dir, "mlp", 256);
      grads[again] = step(ex).grads;
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
  const auto file = [&](const std::string& runtime) {
    std::ofstream(dir + "/m.toml") << "[dataset]\nplugin = \"trees\"\n[adapter]\nplugin = \"points\"\n"
                                   << "[loss.point_set]\n[runtime]\n"
                                   << runtime;
    return ExperimentFile::load(dir + "/m.toml", {});
  };
  try {
    const ExperimentFile f = file("kernels = \"portable\"\nrecompute = \"mlp\"\n");
    f.resolve(f.variants()[0], htm::testing::plugins());
    FAIL() << "recompute = \"mlp\" with the portable kernels was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("m.toml:8"), std::string::npos) << message;
    EXPECT_NE(message.find("needs the native or gpu kernels"), std::string::npos) << message;
  }
  // With the gpu kernels, a graph and dropout it is accepted (nothing in it is drawn).
  const ExperimentFile f = file("kernels = \"gpu\"\nrecompute = \"mlp\"\ncuda_graph = \"eager\"\n");
  EXPECT_NO_THROW(f.resolve(f.variants()[0], htm::testing::plugins()));
}

}  // namespace
}  // namespace htm
