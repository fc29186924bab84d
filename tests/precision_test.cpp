// runtime.precision = "bf16" (issue 16): the rounding against torch's, the linear layer and the
// fused attention against fp32 (values and gradients, bf16 tolerances), backward in the
// precision its forward ran in, policies deciding in fp32, and a tiny training run whose test
// MSE agrees with fp32's. Where oneDNN finds no bf16 instructions the GEMM tests are skipped,
// saying so (the fallback itself is the cli test precision_fallback).
#include <cstring>
#include <fstream>

#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "commands/runner.h"
#include "htm/layers.h"
#include "kernels/fused_linear.h"
#include "kernels/precision.h"
#include "registry.h"
#if HTM_NATIVE_KERNELS
#include "kernels/native/gemm.h"
#endif
#include "store/results_store.h"
#include "test_util.h"

namespace htm {
namespace {

#define SKIP_WITHOUT_BF16()                                                                        \
  if (!cpu_has_bf16())                                                                             \
  GTEST_SKIP() << "skipped: oneDNN finds no AVX512-BF16 or AMX-BF16 on this CPU, so runs in bf16 " \
                  "fall back to fp32"

// ‖a − b‖ / ‖b‖.
double norm_error(const torch::Tensor& a, const torch::Tensor& b) { return ((a - b).norm() / b.norm()).item<double>(); }

torch::Tensor rounded(const torch::Tensor& x) { return x.to(torch::kBFloat16).to(torch::kFloat); }

#if HTM_NATIVE_KERNELS
TEST(Bf16, RoundingMatchesTorchsRoundToNearestEven) {
  torch::manual_seed(0);
  auto x = torch::cat({torch::randn({1000}) * 1e3, torch::randn({1000}) * 1e-3, torch::randn({37}),
                       // ties: halfway between two bf16 values, one with an even and one with an odd last bit
                       torch::tensor({1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -0.0f, 65504.0f, 3.4e38f})});
  std::vector<uint16_t> ours(x.numel());
  to_bf16(x.data_ptr<float>(), 1, x.numel(), x.numel(), ours.data());
  auto theirs = x.to(torch::kBFloat16);
  EXPECT_EQ(std::memcmp(ours.data(), theirs.data_ptr(), ours.size() * 2), 0);
  // A strided block (every other column of a 3×8) is packed row by row.
  auto m = torch::randn({3, 8});
  std::vector<uint16_t> packed(12);
  to_bf16(m.data_ptr<float>(), 3, 4, 8, packed.data());
  auto expected = m.narrow(1, 0, 4).contiguous().to(torch::kBFloat16);
  EXPECT_EQ(std::memcmp(packed.data(), expected.data_ptr(), 24), 0);
  // A NaN stays a NaN, whatever its payload.
  const uint32_t payloads[] = {0x7f800001u, 0x7fc00000u, 0xffffffffu};
  for (uint32_t bits : payloads) {
    float nan;
    std::memcpy(&nan, &bits, 4);
    uint16_t out = 0;
    to_bf16(&nan, 1, 1, 1, &out);
    EXPECT_TRUE((out & 0x7f80u) == 0x7f80u && (out & 0x7fu) != 0) << std::hex << bits << " -> " << out;
  }
}
#endif

TEST(Bf16, LinearMultipliesTheRoundedOperandsInFp32AndBackpropagatesWithinBf16Tolerance) {
  SKIP_WITHOUT_BF16();
  torch::manual_seed(1);
  Linear layer(96, 40);
  auto x = torch::randn({3, 50, 96}).requires_grad_(true);
  auto g = torch::randn({3, 50, 40});
  auto fp32 = layer->forward(x);
  auto fp32_grads = torch::autograd::grad({fp32}, {x, layer->weight, layer->bias}, {g});
  torch::Tensor y;
  {
    PrecisionScope bf16(Precision::bf16);
    y = layer->forward(x);
  }
  // Forward: exactly the fp32 product of the bf16-rounded operands, up to summation order.
  auto on_rounded = torch::matmul(rounded(x), rounded(layer->weight).t()) + layer->bias;
  EXPECT_LT(norm_error(y, on_rounded), 1e-6);
  EXPECT_LT(norm_error(y, fp32), 1e-2);
  EXPECT_GT(norm_error(y, fp32), 1e-5);  // it really ran in bf16
  // Backward ran after the scope closed, yet in bf16 as its forward did.
  auto grads = torch::autograd::grad({y}, {x, layer->weight, layer->bias}, {g});
  auto dx_rounded = torch::matmul(rounded(g), rounded(layer->weight));
  EXPECT_LT(norm_error(grads[0], dx_rounded), 1e-6);
  EXPECT_LT(norm_error(grads[0], fp32_grads[0]), 1e-2);
  EXPECT_LT(norm_error(grads[1], fp32_grads[1]), 1e-2);
  EXPECT_LT(norm_error(grads[2], fp32_grads[2]), 1e-6);  // the bias gradient is an fp32 sum
  EXPECT_EQ(matmul_precision(), Precision::fp32);        // the scope restored it
}

TEST(Bf16, FusedAttentionIsWithinBf16ToleranceOfFp32ValuesAndGradients) {
  SKIP_WITHOUT_BF16();
  // Per-batch and broadcast queries; k and v strided halves of one projection, as in the model.
  for (auto [bq, B, Tq, Tk, C, h, p] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double>>{
           {3, 3, 70, 33, 32, 2, 0.0}, {1, 4, 130, 9, 24, 3, 0.0}, {2, 2, 40, 200, 16, 1, 0.2}}) {
    torch::manual_seed(2);
    auto kv = torch::randn({B, Tk, 2 * C});
    auto q = torch::randn({bq, Tq, C}).requires_grad_(true);
    auto k = kv.narrow(2, 0, C).requires_grad_(true), v = kv.narrow(2, C, C).requires_grad_(true);
    auto g = torch::randn({B, Tq, C});
    auto run = [&](Precision precision) {
      torch::manual_seed(5);  // the same dropout mask
      PrecisionScope scope(precision);
      auto out = fused_attention(q, k, v, h, p, true);
      auto grads = torch::autograd::grad({out}, {q, k, v}, {g});
      grads.insert(grads.begin(), out);
      return grads;
    };
    auto fp32 = run(Precision::fp32), bf16 = run(Precision::bf16);
    const char* names[] = {"output", "dq", "dk", "dv"};
    for (int i = 0; i < 4; ++i) {
      const double error = norm_error(bf16[i], fp32[i]);
      EXPECT_LT(error, 2e-2) << names[i] << " (bq=" << bq << ", Tk=" << Tk << ", p=" << p << ")";
      EXPECT_GT(error, 1e-5) << names[i] << ": it really ran in bf16";
    }
  }
}

TEST(Bf16, PoliciesDecideInFp32WhateverTheRunsPrecision) {
  PrecisionScope run(Precision::bf16);
  struct Fake {
    virtual ~Fake() = default;
  } plugin;
  {
    PluginScope policy(PluginKind::policy, &plugin);
    EXPECT_EQ(matmul_precision(), Precision::fp32);
  }
  EXPECT_EQ(matmul_precision(), Precision::bf16);
  {
    PluginScope merge(PluginKind::merge, &plugin);
    EXPECT_EQ(matmul_precision(), Precision::bf16);
  }
}

// The end-to-end test's tiny Fashion-MNIST autoencoder, at a given precision.
std::string tiny(const std::string& dir, const std::string& precision) {
  const std::string path = dir + "/" + precision + ".toml";
  std::ofstream(path) << "[experiment]\nname = \"tiny\"\nseeds = [0]\n"
                      << "[adapter]\nplugin = \"image\"\npatch = 7\nfourier_bands = 4\n"
                      << "[model]\ndim = 32\nheads = 2\nlayers = 4\nmlp_ratio = 2\n"
                      << "[train]\nepochs = 3\nbatch_size = 16\ntrain_samples = 256\neval_samples = 64\n"
                      << "checkpoint = false\nimages = 0\n"
                      << "[runtime]\nthreads = 1\nprecision = \"" << precision << "\"\nresults = \"" << dir
                      << "/htm.sqlite\"\nartifacts = \"" << dir << "/runs\"\n";
  return path;
}

TEST(Bf16, ATinyRunTrainsToTheSameTestMseAsFp32AndIsAnotherRun) {
  SKIP_WITHOUT_BF16();
  PrecisionScope restore(matmul_precision());  // a run puts its precision in force: not for the next test
  const std::string dir = htm::testing::fresh_dir("bf16");
  Registry registry({HTM_PLUGIN_DIR});
  for (const char* precision : {"fp32", "bf16"}) {
    RunRequest request;
    request.file = tiny(dir, precision);
    ASSERT_EQ(run_experiment(request, registry), 0) << precision;
  }
  ResultsStore store(dir + "/htm.sqlite");
  auto rows = store
                  .query(
                      "SELECT r.config_hash, m.value FROM runs r JOIN latest_metrics m ON m.run_id = r.id "
                      "WHERE m.split = 'test' AND m.name = 'mse' ORDER BY r.id")
                  .rows;
  ASSERT_EQ(rows.size(), 2u);  // bf16 is not taken for the finished fp32 run
  EXPECT_NE(rows[0][0], rows[1][0]);
  const double fp32 = std::stod(rows[0][1]), bf16 = std::stod(rows[1][1]);
  EXPECT_NE(fp32, bf16);
  EXPECT_NEAR(bf16, fp32, 0.05 * fp32) << "fp32 " << fp32 << ", bf16 " << bf16;
}

// An MLP's second half as one node (it keeps h, not gelu(h) too): the same values and gradients
// as linear(gelu(h)), bit for bit in fp32.
TEST(GeluLinear, EqualsLinearOfGeluWhileKeepingOneActivation) {
  torch::manual_seed(6);
  Linear layer(64, 24);
  auto h = torch::randn({2, 33, 64}).requires_grad_(true);
  auto g = torch::randn({2, 33, 24});
  auto fused = gelu_linear(h, layer->weight, layer->bias);
  auto plain = layer->forward(torch::gelu(h));
  EXPECT_TRUE(torch::equal(fused, plain));
  auto gf = torch::autograd::grad({fused}, {h, layer->weight, layer->bias}, {g});
  auto gp = torch::autograd::grad({plain}, {h, layer->weight, layer->bias}, {g});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(gf[i], gp[i])) << i << ": " << (gf[i] - gp[i]).abs().max();
}

// The MLP's first end: LayerNorm then Linear as one node, keeping x alone. Rows wider than 64
// keep torch's norm, bit for bit; narrower ones (the native kernels' own norm,
// kernels/native/layer_norm.h, on an AVX-512 CPU) agree to rounding, values and every gradient.
TEST(NormLinear, EqualsLinearOfLayerNormWhileKeepingOneActivation) {
  for (const int64_t C : {96, 48, 16, 5}) {
    torch::manual_seed(7);
    torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({C}));
    {
      torch::NoGradGuard no_grad;
      norm->weight.uniform_(0.5, 1.5);
      norm->bias.uniform_(-0.5, 0.5);
    }
    Linear layer(C, 20);
    auto x = torch::randn({3, 17, C}).requires_grad_(true);
    auto g = torch::randn({3, 17, 20});
    auto fused = norm_linear(x, norm->weight, norm->bias, 1e-5, layer->weight, layer->bias);
    auto plain = layer->forward(norm->forward(x));
    const std::vector<torch::Tensor> inputs = {x, norm->weight, norm->bias, layer->weight, layer->bias};
    auto gf = torch::autograd::grad({fused}, inputs, {g});
    auto gp = torch::autograd::grad({plain}, inputs, {g});
    if (C > 64) {
      EXPECT_TRUE(torch::equal(fused, plain));
      for (size_t i = 0; i < inputs.size(); ++i)
        EXPECT_TRUE(torch::equal(gf[i], gp[i])) << i << ": " << (gf[i] - gp[i]).abs().max();
      continue;
    }
    EXPECT_TRUE(torch::allclose(fused, plain, 1e-4, 1e-5)) << "C=" << C << ": " << (fused - plain).abs().max();
    for (size_t i = 0; i < inputs.size(); ++i)
      EXPECT_TRUE(torch::allclose(gf[i], gp[i], 1e-4, 1e-4))
          << "C=" << C << " input " << i << ": " << (gf[i] - gp[i]).abs().max();
  }
}

}  // namespace
}  // namespace htm
