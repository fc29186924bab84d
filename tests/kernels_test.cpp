// The backend seam (kernels/kernels.h): the portable kernels against their definitions (the dropout
// masks bit for bit against the counter stream, the pair sampler's distribution against the
// exact one) and, where the build has them, against the native kernels op by op, values and
// gradients. Tolerances: fp32 1e-5 relative (the two sum in different orders); bf16 1e-2
// relative (both round the same operands, but the portable kernels also round the gradient
// that leaves a rounded operand, 2⁻⁸ relative at most).
#include <cmath>
#include <cstring>
#include <map>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/device.h"
#include "htm/layers.h"
#include "htm/policy.h"
#include "kernels/counter_rng.h"
#include "kernels/fused_linear.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "kernels/portable.h"
#include "kernels/precision.h"
#include "train/experiment.h"
#include "train/optimizer.h"
#if HTM_NATIVE_KERNELS
#include "kernels/native/gemm.h"
#include "kernels/native/native.h"
#endif

namespace htm {
namespace {

// ‖a − b‖ / ‖b‖.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm().clamp_min(1e-30)).item<double>();
}

// What the native dropout keeps, entry by entry, from the scalar counter stream.
float kept(uint64_t seed, int64_t first, int64_t e, double p) {
  const uint64_t g = static_cast<uint64_t>(first + e);
  const uint32_t threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
  return ((counter_bits(seed, g / 4) >> (16 * (g % 4))) & 0xffff) >= threshold ? static_cast<float>(1 / (1 - p)) : 0;
}

TEST(PortableKernels, DropoutMaskIsTheCounterStreamBitForBit) {
  for (int64_t first : {0, 3, 8, 1001})
    for (double p : {0.1, 0.5}) {
      auto mask = portable::dropout_mask({3, 7}, p, 99, first, torch::Device(torch::kCPU));
      for (int64_t e = 0; e < 21; ++e)
        ASSERT_EQ(mask.view(-1)[e].item<float>(), kept(99, first, e, p)) << "first " << first << " entry " << e;
    }
}

TEST(PortableKernels, AttentionMaskIsTheCounterStreamBitForBit) {
  // Row n's entry j: lane j mod 4 of splitmix64(counter_bits(seed, first + n) + 4⌊j/4⌋).
  const double p = 0.3;
  const uint32_t threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
  auto mask = portable::attention_mask(5, 11, p, 1234, 7, torch::Device(torch::kCPU));
  ASSERT_EQ(mask.sizes(), (std::vector<int64_t>{5, 11}));
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t j = 0; j < 11; ++j) {
      const uint64_t bits = splitmix64(counter_bits(1234, 7 + n) + static_cast<uint64_t>(j - j % 4));
      const float expected = ((bits >> (16 * (j % 4))) & 0xffff) >= threshold ? static_cast<float>(1 / (1 - p)) : 0;
      ASSERT_EQ(mask[n][j].item<float>(), expected) << n << "," << j;
    }
}

TEST(PortableKernels, RoundingToBf16IsRoundToNearestEven) {
  // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: even wins (1); 1 + 3·2⁻⁸ rounds up to 1 + 2⁻⁶.
  auto x = torch::tensor({1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f});
  auto r = portable::round_bf16(x);
  EXPECT_EQ(r[0].item<float>(), 1.0f);
  EXPECT_EQ(r[1].item<float>(), 1.0f + 4.0f / 256);
  EXPECT_EQ(r[2].item<float>(), -2.5f);
}

// Every outcome of r = 2 disjoint pairs from T = 5 tokens: frequencies over many draws against
// the probabilities the exact log-probability gives them.
void expect_sampler_distribution(Kernels kernels, const torch::Device& device = torch::Device(torch::kCPU)) {
  KernelsScope scope(kernels);
  torch::manual_seed(3);
  const int64_t T = 5, r = 2, draws = 20000;
  auto logits = torch::randn({1, T, T}) * 1.5;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  auto [src_on, dst_on] = sample_disjoint_pairs(logits.expand({draws, T, T}).contiguous().to(device), r, gen);
  ASSERT_EQ(src_on.device(), device);
  auto src = src_on.to(torch::kCPU), dst = dst_on.to(torch::kCPU);  // host: counting outcomes
  ASSERT_EQ(src.sizes(), (std::vector<int64_t>{draws, r}));
  EXPECT_TRUE((src != dst).all().item<bool>());
  EXPECT_TRUE(
      (src.select(1, 0) != src.select(1, 1)).logical_and(src.select(1, 0) != dst.select(1, 1)).all().item<bool>());
  std::map<int64_t, int64_t> count;
  auto code = ((src.select(1, 0) * T + dst.select(1, 0)) * T + src.select(1, 1)) * T + dst.select(1, 1);
  for (int64_t i = 0; i < draws; ++i) ++count[code[i].item<int64_t>()];
  double tv = 0, total_p = 0;
  for (int64_t c = 0; c < T * T * T * T; ++c) {
    const int64_t s0 = c / (T * T * T), d0 = c / (T * T) % T, s1 = c / T % T, d1 = c % T;
    if (s0 == d0 || s1 == d1 || s1 == s0 || s1 == d0 || d1 == s0 || d1 == d0) continue;
    auto s = torch::tensor({s0, s1}).view({1, 2}), d = torch::tensor({d0, d1}).view({1, 2});
    const double p = pair_log_prob(logits, s, d, LogProbForm::exact).sum().exp().item<double>();
    total_p += p;
    tv += std::abs(p - static_cast<double>(count[c]) / draws) / 2;
  }
  EXPECT_NEAR(total_p, 1.0, 1e-6);
  EXPECT_LT(tv, 0.03) << kernels_name(kernels) << ": total variation from the exact distribution";
}

TEST(PortableKernels, PairSamplerDrawsTheExactDistribution) { expect_sampler_distribution(Kernels::portable); }

TEST(PortableKernels, PairSamplerDrawsUniformlyWhenEveryAllowedPairHasProbabilityZero) {
  KernelsScope scope(Kernels::portable);
  const float inf = std::numeric_limits<float>::infinity();
  auto logits = torch::full({2000, 4, 4}, -inf);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto [src, dst] = sample_disjoint_pairs(logits, 2, gen);
  EXPECT_TRUE((src != dst).all().item<bool>());
  // 12 ordered first pairs, each about 1/12 of the draws.
  auto first = torch::bincount(src.select(1, 0) * 4 + dst.select(1, 0), {}, 16).to(torch::kDouble) / 2000;
  for (int64_t k = 0; k < 16; ++k)
    if (k / 4 != k % 4) EXPECT_NEAR(first[k].item<double>(), 1.0 / 12, 0.03) << k;
}

// The gpu kernels (kernels/gpu.h) on the CPU: the same maths as the portable ones, or the same draws
// from the same noise; their random streams are the device's own.

// Logits with −∞ entries and ties, noise with ties: cases where the order of the greedy rule
// depends on every tie-break.
std::pair<torch::Tensor, torch::Tensor> hard_case(int64_t B, int64_t T, int64_t seed) {
  torch::manual_seed(seed);
  auto logits = (torch::randn({B, T, T}) * 2).round();  // many equal logits
  logits.masked_fill_(torch::rand({B, T, T}) < 0.2, -std::numeric_limits<float>::infinity());
  if (B > 1) logits[0].fill_(-std::numeric_limits<float>::infinity());  // a sample all −∞: noise decides
  auto noise = (torch::rand({B, T, T}) * 4).round() / 2;                // equal keys and equal noise
  noise.masked_fill_(torch::rand({B, T, T}) < 0.5, 0.0);
  return {logits, noise};
}

// runtime.kernels picks the set: "gpu" runs the gpu kernels on a CPU tensor too (to count or
// test a GPU step's path on a machine without one), "native" only off the CPU.
TEST(GpuKernels, RuntimeKernelsChoosesTheSetAndGpuRunsOnTheCpuToo) {
  KernelsScope restore(kernels());
  const auto cpu = torch::zeros({2});
  use_kernels(RuntimeKernels::gpu);
  EXPECT_EQ(kernels(), Kernels::gpu);
  EXPECT_EQ(&backend_for(cpu), &gpu_backend());
  EXPECT_STREQ(backend_for(cpu).name(), "gpu");
  use_kernels(RuntimeKernels::portable);
  EXPECT_EQ(kernels(), Kernels::portable);
  EXPECT_EQ(&backend_for(cpu), &portable_backend());
  EXPECT_STREQ(backend_for(cpu).name(), "portable");
  use_kernels(RuntimeKernels::native);
  EXPECT_EQ(kernels(), Kernels::native);
  EXPECT_EQ(&backend_for(cpu), &native_backend());
  EXPECT_STREQ(backend_for(cpu).name(), native_kernels_built() ? "native" : "portable");
}

TEST(GpuKernels, MatchingTakesTheGreedyPairsInTheirOrder) {
  for (int64_t T : {2, 3, 4, 7, 16, 33})
    for (int64_t seed = 0; seed < 6; ++seed) {
      auto [logits, noise] = hard_case(5, T, seed);
      if (seed % 2) noise = -torch::empty({5, T, T}).exponential_().log();  // continuous, as drawn
      for (int64_t r : {int64_t{0}, int64_t{1}, T / 2}) {
        auto [gs, gd] = gpu::match_pairs(logits, noise, r);
        auto [ps, pd] = portable::greedy_pairs(logits, noise, r);
        ASSERT_TRUE(torch::equal(gs, ps)) << "T " << T << " seed " << seed << " r " << r;
        ASSERT_TRUE(torch::equal(gd, pd)) << "T " << T << " seed " << seed << " r " << r;
      }
    }
}

TEST(GpuKernels, MatchingTakesFewRoundsAtThePaperSize) {
  // T = 256, r = 128 (the first merging layer): the portable rule takes 128 rounds over B×T².
  torch::manual_seed(0);
  auto logits = torch::randn({16, 256, 256});
  auto noise = -torch::empty({16, 256, 256}).exponential_().log();
  int64_t rounds = 0;
  auto [src, dst] = gpu::match_pairs(logits, noise, 128, &rounds);
  auto [ps, pd] = portable::greedy_pairs(logits, noise, 128);
  EXPECT_TRUE(torch::equal(src, ps) && torch::equal(dst, pd));
  EXPECT_LE(rounds, 32) << "rounds of mutual best pairs";
}

TEST(GpuKernels, PairSamplerDrawsTheExactDistribution) { expect_sampler_distribution(Kernels::gpu); }

TEST(GpuKernels, TheSameSeedDrawsTheSameAndAnotherDrawsOtherwise) {
  KernelsScope scope(Kernels::gpu);
  torch::manual_seed(2);
  auto logits = torch::randn({4, 12, 12});
  auto draw = [&](uint64_t seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    auto [src, dst] = sample_disjoint_pairs(logits, 6, gen);
    return torch::cat({src, dst}, 1);
  };
  EXPECT_TRUE(torch::equal(draw(7), draw(7)));
  EXPECT_FALSE(torch::equal(draw(7), draw(8)));
  // The run's generator advances by one 64-bit draw per call, not by B·T² (the portable noise).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  sample_disjoint_pairs(logits, 6, gen);
  auto reference = at::make_generator<at::CPUGeneratorImpl>(7);
  at::check_generator<at::CPUGeneratorImpl>(reference)->random64();
  EXPECT_EQ(at::check_generator<at::CPUGeneratorImpl>(gen)->random64(),
            at::check_generator<at::CPUGeneratorImpl>(reference)->random64());
}

TEST(GpuKernels, GumbelNoiseHasTheGumbelMeanAndVariance) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  auto g = gpu_backend().gumbel_like(torch::empty({400, 1000}), gen).to(torch::kDouble);
  EXPECT_NEAR(g.mean().item<double>(), 0.5772156649, 0.01);    // Euler–Mascheroni
  EXPECT_NEAR(g.var().item<double>(), M_PI * M_PI / 6, 0.02);  // π²/6
  EXPECT_TRUE(torch::isfinite(g).all().item<bool>());
}

TEST(GpuKernels, LayersAndAttentionMatchThePortableOnesInFp32AndBf16) {
  torch::manual_seed(1);
  auto x = torch::randn({3, 7, 24}), w = torch::randn({10, 24}) * 0.2, b = torch::randn({10});
  auto nw = torch::rand({24}) + 0.5, nb = torch::randn({24}) * 0.1;
  auto q = torch::randn({1, 9, 16}), k = torch::randn({4, 9, 16}), v = torch::randn({4, 9, 16});
  auto outputs = [&](Kernels kernels, Precision precision) {
    KernelsScope scope(kernels);
    PrecisionScope in(precision);
    std::vector<torch::Tensor> in_;
    for (const auto& t : {x, w, b, nw, nb, q, k, v}) in_.push_back(t.clone().requires_grad_(true));
    auto y = gelu_linear(norm_linear(in_[0], in_[3], in_[4], 1e-5, in_[1], in_[2]), in_[1].narrow(1, 0, 10), in_[2]);
    auto z = fused_attention(in_[5], in_[6], in_[7], 2, 0.0, true);
    auto loss = y.pow(2).sum() + z.pow(2).sum();
    auto grads = torch::autograd::grad({loss}, in_);
    std::vector<torch::Tensor> out = {y.detach(), z.detach()};
    for (auto& g : grads) out.push_back(g);
    return out;
  };
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    const double tolerance = precision == Precision::fp32 ? 1e-5 : 3e-2;
    auto ours = outputs(Kernels::gpu, precision), reference = outputs(Kernels::portable, precision);
    for (size_t i = 0; i < ours.size(); ++i)
      EXPECT_LT(relative_error(ours[i], reference[i]), tolerance)
          << "output " << i << (precision == Precision::bf16 ? " bf16" : " fp32");
  }
}

TEST(GpuKernels, DropoutKeepsOneMinusPAndTheSameSeedKeepsTheSame) {
  auto x = torch::ones({200, 500});
  auto a = gpu_backend().dropout(x, 0.3, 42, 0), b = gpu_backend().dropout(x, 0.3, 42, 0),
       c = gpu_backend().dropout(x, 0.3, 42, 100000);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  EXPECT_NEAR((a == 0).to(torch::kDouble).mean().item<double>(), 0.3, 0.01);
  EXPECT_NEAR(a.mean().item<double>(), 1.0, 0.02);  // kept entries are 1/(1 − p)
  torch::manual_seed(3);
  auto q = torch::randn({2, 16, 8}), k = torch::randn({2, 16, 8}), v = torch::randn({2, 16, 8});
  auto u = gpu_backend().fused_attention(q, k, v, 2, 0.5, 9, 0),
       w = gpu_backend().fused_attention(q, k, v, 2, 0.5, 9, 0);
  EXPECT_TRUE(torch::equal(u, w));
  EXPECT_FALSE(torch::equal(u, gpu_backend().fused_attention(q, k, v, 2, 0.0, 9, 0)));
}

TEST(GpuKernels, AdamWOnAllParametersAtOnceIsThePortableUpdateBitForBit) {
  torch::manual_seed(4);
  std::vector<torch::Tensor> init = {torch::randn({50}), torch::randn({7, 3})};
  std::vector<std::vector<torch::Tensor>> params;
  for (Kernels kernels : {Kernels::gpu, Kernels::portable}) {
    KernelsScope scope(kernels);
    std::vector<torch::Tensor> p;
    for (const auto& t : init) p.push_back(t.clone().requires_grad_(true));
    FusedAdamW adam(p, 1e-2, 0.01, 0.9, 0.999, 1e-8);
    torch::manual_seed(5);
    for (int step = 0; step < 5; ++step) {
      for (auto& t : p) t.mutable_grad() = torch::randn(t.sizes());
      adam.step();
    }
    params.push_back(p);
  }
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[0][i], params[1][i])) << "parameter " << i;
    EXPECT_FALSE(torch::equal(params[0][i], init[i]));
  }
}

// On a GPU (skipped where this libtorch has none or sees none): the portable kernels there
// against the same kernels on the CPU.
class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  }
  const torch::Device cpu{torch::kCPU}, gpu{torch::kCUDA, 0};
};

TEST_F(CudaKernels, DropoutAndAttentionMasksAreTheCpuOnesBitForBit) {
  for (int64_t first : {0, 3, 1001}) {
    auto a = portable::dropout_mask({4, 33}, 0.3, 77, first, cpu);
    auto b = portable::dropout_mask({4, 33}, 0.3, 77, first, gpu);
    EXPECT_TRUE(torch::equal(a, b.to(cpu))) << "first " << first;
  }
  auto a = portable::attention_mask(40, 37, 0.2, 5, 9, cpu), b = portable::attention_mask(40, 37, 0.2, 5, 9, gpu);
  EXPECT_TRUE(torch::equal(a, b.to(cpu)));
}

TEST_F(CudaKernels, LayersAttentionAndAdamWMatchTheCpuInFp32) {
  torch::manual_seed(1);
  auto x = torch::randn({3, 7, 24}), w = torch::randn({10, 24}) * 0.2, b = torch::randn({10});
  auto q = torch::randn({1, 30, 16}), k = torch::randn({4, 9, 16}), v = torch::randn({4, 9, 16});
  auto on = [&](const torch::Device& d) {
    KernelsScope scope(Kernels::portable);
    std::vector<torch::Tensor> in;
    for (const auto& t : {x, w, b, q, k, v}) in.push_back(t.to(d).requires_grad_(true));
    torch::manual_seed(17);
    auto y = gelu_linear(linear(in[0], in[1], in[2]), in[1].narrow(1, 0, 10), in[2]);
    auto z = fused_attention(in[3], in[4], in[5], 2, 0.25, true);
    auto loss = y.pow(2).sum() + z.pow(2).sum();
    auto grads = torch::autograd::grad({loss}, in);
    std::vector<torch::Tensor> out = {y.detach(), z.detach()};
    for (auto& g : grads) out.push_back(g);
    auto p = in[1].detach().clone();
    FusedAdamW adam({p}, 1e-2, 0.01);
    p.mutable_grad() = grads[1];
    adam.step();
    out.push_back(p);
    for (auto& t : out) t = t.to(cpu);
    return out;
  };
  auto host = on(cpu), device = on(gpu);
  for (size_t i = 0; i < host.size(); ++i) EXPECT_LT(relative_error(device[i], host[i]), 1e-4) << "output " << i;
}

TEST_F(CudaKernels, PairSamplerDrawsTheExactDistributionOnTheGpu) {
  expect_sampler_distribution(Kernels::portable, gpu);
  expect_sampler_distribution(Kernels::native, gpu);  // a GPU tensor takes the gpu kernels
}

TEST_F(CudaKernels, MatchingOnTheGpuTakesTheCpuPairs) {
  for (int64_t T : {4, 33, 256}) {
    auto [logits, noise] = hard_case(8, T, T);
    if (T == 256) noise = -torch::empty({8, T, T}).exponential_().log();
    auto [hs, hd] = gpu::match_pairs(logits, noise, T / 2);
    auto [ds, dd] = gpu::match_pairs(logits.to(gpu), noise.to(gpu), T / 2);
    EXPECT_TRUE(torch::equal(hs, ds.to(cpu)) && torch::equal(hd, dd.to(cpu))) << "T " << T;
  }
}

TEST_F(CudaKernels, GpuKernelsMatchTheCpuAndDrawTheSameTwice) {
  torch::manual_seed(1);
  auto x = torch::randn({3, 7, 24}), w = torch::randn({10, 24}) * 0.2, b = torch::randn({10});
  auto q = torch::randn({1, 30, 16}), k = torch::randn({4, 9, 16}), v = torch::randn({4, 9, 16});
  auto on = [&](const torch::Device& d, double p) {
    KernelsScope scope(Kernels::gpu);
    std::vector<torch::Tensor> in;
    for (const auto& t : {x, w, b, q, k, v}) in.push_back(t.to(d).requires_grad_(true));
    torch::manual_seed(17);
    auto y = gelu_linear(linear(in[0], in[1], in[2]), in[1].narrow(1, 0, 10), in[2]);
    auto z = fused_attention(in[3], in[4], in[5], 2, p, true);
    auto loss = y.pow(2).sum() + z.pow(2).sum();
    auto grads = torch::autograd::grad({loss}, in);
    std::vector<torch::Tensor> out = {y.detach(), z.detach()};
    for (auto& g : grads) out.push_back(g);
    for (auto& t : out) t = t.to(cpu);
    return out;
  };
  auto host = on(cpu, 0.0), device = on(gpu, 0.0);
  for (size_t i = 0; i < host.size(); ++i) EXPECT_LT(relative_error(device[i], host[i]), 1e-4) << "output " << i;
  auto once = on(gpu, 0.25), twice = on(gpu, 0.25);  // the fused kernel's dropout, seeded per call
  for (size_t i = 0; i < once.size(); ++i) EXPECT_TRUE(torch::equal(once[i], twice[i])) << "output " << i;
  EXPECT_FALSE(torch::equal(once[1], device[1]));
}

TEST_F(CudaKernels, DropoutOnTheGpuIsOneSeededKernel) {
  auto x = (torch::rand({64, 1000}) + 0.5).to(gpu).requires_grad_(true);
  auto a = gpu_backend().dropout(x, 0.3, 42, 0), b = gpu_backend().dropout(x, 0.3, 42, 0),
       c = gpu_backend().dropout(x, 0.3, 42, 100000);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  auto kept = (a != 0).to(torch::kDouble);
  EXPECT_NEAR(kept.mean().item<double>(), 0.7, 0.01);
  EXPECT_TRUE(torch::allclose(a.detach(), x.detach() * kept.to(torch::kFloat) / 0.7, 1e-5, 1e-6));
  auto grad = torch::autograd::grad({a.sum()}, {x})[0];
  EXPECT_TRUE(torch::allclose(grad, kept.to(torch::kFloat) / 0.7, 1e-5, 1e-6));
}

#if HTM_NATIVE_KERNELS

TEST(NativeKernels, PairSamplerDrawsTheExactDistribution) { expect_sampler_distribution(Kernels::native); }

// One op's values and gradients under each kernel set, the same inputs and gradient.
struct Run {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

template <class F>
Run run(Kernels kernels, std::vector<torch::Tensor> inputs, const torch::Tensor& grad_out, F&& op) {
  KernelsScope scope(kernels);
  for (auto& t : inputs) t = t.detach().clone().requires_grad_(true);
  torch::manual_seed(17);  // the dropout seeds
  auto out = op(inputs);
  auto grads = torch::autograd::grad({out}, inputs, {grad_out});
  return {out.detach(), grads};
}

template <class F>
void expect_same(const std::vector<torch::Tensor>& inputs, F&& op, double tolerance, const std::string& what) {
  std::vector<torch::Tensor> copies = inputs;
  const auto sizes = op(copies).sizes().vec();
  torch::manual_seed(23);
  auto grad_out = torch::randn(sizes);
  const Run a = run(Kernels::native, inputs, grad_out, op), b = run(Kernels::portable, inputs, grad_out, op);
  EXPECT_LE(relative_error(b.out, a.out), tolerance) << what << ": values";
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LE(relative_error(b.grads[i], a.grads[i]), tolerance) << what << ": gradient " << i;
}

TEST(NativeKernels, LinearLayersMatchThePortableOnesInFp32AndBf16) {
  torch::manual_seed(1);
  auto x = torch::randn({3, 7, 24}), w = torch::randn({10, 24}) * 0.2, b = torch::randn({10});
  auto nw = torch::rand({24}) + 0.5, nb = torch::randn({24}) * 0.1;
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    if (precision == Precision::bf16 && !cpu_has_bf16()) continue;  // native bf16 needs the hardware
    PrecisionScope in_force(precision);
    const double tol = precision == Precision::fp32 ? 1e-5 : 1e-2;
    const std::string p = precision == Precision::fp32 ? " fp32" : " bf16";
    expect_same(
        {x, w, b}, [](auto& in) { return linear(in[0], in[1], in[2]); }, tol, "linear" + p);
    expect_same(
        {x, w, b}, [](auto& in) { return gelu_linear(in[0], in[1], in[2]); }, tol, "gelu_linear" + p);
    expect_same(
        {x, nw, nb, w, b}, [](auto& in) { return norm_linear(in[0], in[1], in[2], 1e-5, in[3], in[4]); }, tol,
        "norm_linear" + p);
  }
}

TEST(NativeKernels, FusedAttentionMatchesThePortableOneWithAndWithoutDropout) {
  torch::manual_seed(2);
  for (auto [bq, B, Tq, Tk, C, h] :
       std::vector<std::array<int64_t, 6>>{{3, 3, 70, 33, 16, 2}, {1, 4, 30, 9, 12, 3}, {2, 2, 5, 200, 8, 1}}) {
    auto q = torch::randn({bq, Tq, C}), k = torch::randn({B, Tk, C}), v = torch::randn({B, Tk, C});
    for (double p : {0.0, 0.25}) {
      const std::string what =
          "attention B=" + std::to_string(B) + " bq=" + std::to_string(bq) + " p=" + std::to_string(p);
      expect_same(
          {q, k, v}, [&](auto& in) { return fused_attention(in[0], in[1], in[2], h, p, true); }, 1e-5, what);
      if (cpu_has_bf16()) {
        PrecisionScope bf16(Precision::bf16);
        expect_same(
            {q, k, v}, [&](auto& in) { return fused_attention(in[0], in[1], in[2], h, p, true); }, 1e-2,
            what + " bf16");
      }
    }
  }
}

TEST(NativeKernels, DropoutMasksAreThePortableOnesBitForBit) {
  auto x = torch::randn({6, 5, 7});
  for (int64_t first : {0, 2, 8}) {
    auto a = native_backend().dropout(x, 0.3, 42, first), b = portable_backend().dropout(x, 0.3, 42, first);
    EXPECT_TRUE(torch::equal(a, b)) << "first " << first;
  }
  // Through the public entry point, seeded alike: the same mask, and the same gradient.
  expect_same(
      {x}, [](auto& in) { return fast_dropout(in[0], 0.4, true); }, 0.0, "fast_dropout");
}

TEST(NativeKernels, Bf16RoundingIsThePortableRoundingBitForBit) {
  torch::manual_seed(0);
  auto x = torch::cat({torch::randn({1000}) * 1e3, torch::randn({1000}) * 1e-3});
  std::vector<uint16_t> ours(x.numel());
  to_bf16(x.data_ptr<float>(), 1, x.numel(), x.numel(), ours.data());
  auto theirs = portable::round_bf16(x).to(torch::kBFloat16);
  EXPECT_EQ(std::memcmp(ours.data(), theirs.data_ptr(), ours.size() * 2), 0);
}

TEST(NativeKernels, AdamWMatchesThePortableUpdate) {
  torch::manual_seed(4);
  auto init = torch::randn({50});
  std::vector<torch::Tensor> params;
  for (Kernels kernels : {Kernels::native, Kernels::portable}) {
    KernelsScope scope(kernels);
    auto p = init.clone().requires_grad_(true);
    FusedAdamW adam({p}, 1e-2, 0.01, 0.9, 0.999, 1e-8);
    torch::manual_seed(5);
    for (int step = 0; step < 5; ++step) {
      p.mutable_grad() = torch::randn({50});
      adam.step();
    }
    params.push_back(p.detach());
  }
  EXPECT_LT(relative_error(params[1], params[0]), 1e-6);
  EXPECT_FALSE(torch::equal(params[0], init));
}

#endif

}  // namespace
}  // namespace htm
