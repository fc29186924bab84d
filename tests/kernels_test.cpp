// The backend seam (sdk/kernels.h): the portable kernels against their definitions (the dropout
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
#include "sdk/counter_rng.h"
#include "sdk/fused_linear.h"
#include "sdk/kernels.h"
#include "sdk/portable.h"
#include "sdk/precision.h"
#include "train/optimizer.h"
#if HTM_NATIVE_KERNELS
#include "sdk/native/gemm.h"
#include "sdk/native/native.h"
#endif

namespace htm {
namespace {

// ‖a − b‖ / ‖b‖.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm().clamp_min(1e-30)).item<double>();
}

// What native::dropout keeps, entry by entry, from the scalar counter stream.
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
    auto a = native::dropout(x, 0.3, 42, first), b = portable::dropout(x, 0.3, 42, first);
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
