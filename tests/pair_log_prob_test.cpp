// The exact log-probability's CUDA kernels' parts (kernels/pair_log_prob.h) run on the CPU one after
// another (logprob::log_prob_on_host, grad_on_host): the values and gradients of pair_log_prob's
// torch ops from the same logits and pairs, to rounding (their sums go in another order). On a GPU,
// PairLogProbOnAGpu.* checks the kernels themselves against the CPU (scripts/gpu/check.sh).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "config/device.h"
#include "htm/policy.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "kernels/pair_log_prob.h"

namespace htm {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

// Logits (some −∞ off the diagonal where `holes`) and r pairs drawn from them.
struct Case {
  torch::Tensor logits, src, dst;
};

Case make_case(int64_t B, int64_t T, int64_t r, int64_t seed, bool holes) {
  torch::manual_seed(seed);
  auto logits = torch::randn({B, T, T}) * 3;
  if (holes) logits.masked_fill_(torch::rand({B, T, T}) < 0.2, -kInf);
  auto keys = logits.clone();
  keys.diagonal(0, 1, 2).fill_(-kInf);
  auto [src, dst] = gpu::match_pairs(keys, -torch::empty({B, T, T}).exponential_().log(), r);
  return {logits, src, dst};
}

// The torch ops' log-probabilities and the gradient of Σ g·log p with respect to the logits.
std::pair<torch::Tensor, torch::Tensor> by_ops(const Case& c, const torch::Tensor& g) {
  KernelsScope kernels(Kernels::portable);
  auto logits = c.logits.clone().requires_grad_(true);
  auto out = pair_log_prob(logits, c.src, c.dst, LogProbForm::exact);
  out.backward(g);
  return {out.detach(), logits.grad()};
}

// The kernels' parts on the host: the log-probabilities and the gradient with respect to the
// masked logits (the diagonal's is the masking's, 0, in pair_log_prob).
std::pair<torch::Tensor, torch::Tensor> by_parts(const Case& c, const torch::Tensor& g, int64_t lanes = 32) {
  const int64_t B = c.logits.size(0), T = c.logits.size(1), r = c.src.size(1);
  auto masked = c.logits.clone();
  masked.diagonal(0, 1, 2).fill_(-kInf);
  auto out = torch::empty({B, r}), top = torch::empty({B}), grad = torch::empty({B, T, T});
  auto Z = torch::empty({B, r}, torch::kDouble);
  std::vector<int32_t> taken(T);
  std::vector<double> scratch(r + 1);
  const auto s = c.src.contiguous(), d = c.dst.contiguous(), gg = g.contiguous();
  logprob::log_prob_on_host(masked.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(), B, T, r,
                            out.data_ptr<float>(), Z.data_ptr<double>(), top.data_ptr<float>(), taken.data(),
                            scratch.data(), lanes);
  logprob::grad_on_host(gg.data_ptr<float>(), masked.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(),
                        Z.data_ptr<double>(), top.data_ptr<float>(), B, T, r, grad.data_ptr<float>(), taken.data(),
                        scratch.data());
  grad.diagonal(0, 1, 2).zero_();
  return {out, grad};
}

double worst(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs() / b.abs().clamp_min(1.0)).max().item<double>();
}

TEST(PairLogProb, TheKernelsPartsGiveTheTorchOpsValuesAndGradients) {
  for (int64_t T : {2, 3, 4, 7, 16, 33, 64})
    for (int64_t r : {int64_t{1}, std::max<int64_t>(1, T / 4), T / 2})
      for (bool holes : {false, true}) {
        const auto c = make_case(5, T, r, T * 10 + r, holes);
        const auto g = torch::randn({5, r});
        const auto [ops, ops_grad] = by_ops(c, g);
        for (int64_t lanes : {1, 32}) {
          const auto [parts, parts_grad] = by_parts(c, g, lanes);
          ASSERT_LT(worst(parts, ops), 1e-6) << "T " << T << " r " << r << " holes " << holes;
          ASSERT_LT(worst(parts_grad, ops_grad), 1e-6) << "T " << T << " r " << r << " holes " << holes;
        }
        // The sum of a draw's log-probabilities is the sequence's: each one a proper log-probability.
        EXPECT_TRUE((ops <= 1e-6).all().item<bool>());
      }
}

// The entropy's parts (entropy_on_host, entropy_grad_on_host) against pair_entropy's torch ops:
// the value and the gradient with respect to the logits, with and without −∞ holes.
TEST(PairLogProb, TheEntropysPartsGiveTheTorchOpsValueAndGradient) {
  for (int64_t T : {2, 3, 16, 33, 64})
    for (bool holes : {false, true}) {
      const auto c = make_case(5, T, 1, T, holes);
      const auto g = torch::randn({5});
      auto logits = c.logits.clone().requires_grad_(true);
      torch::Tensor ops;
      {
        KernelsScope kernels(Kernels::portable);
        ops = pair_entropy(logits);
        ops.backward(g);
      }
      auto masked = c.logits.clone();
      masked.diagonal(0, 1, 2).fill_(-kInf);
      auto H = torch::empty({5}), top = torch::empty({5}), grad = torch::empty({5, T, T});
      auto sums = torch::empty({5, 2}, torch::kDouble);
      logprob::entropy_on_host(masked.data_ptr<float>(), 5, T, H.data_ptr<float>(), sums.data_ptr<double>(),
                               top.data_ptr<float>());
      logprob::entropy_grad_on_host(g.data_ptr<float>(), masked.data_ptr<float>(), sums.data_ptr<double>(),
                                    top.data_ptr<float>(), 5, T, grad.data_ptr<float>());
      grad.diagonal(0, 1, 2).zero_();
      EXPECT_LT(worst(H, ops.detach()), 1e-6) << "T " << T << " holes " << holes;
      EXPECT_LT(worst(grad, logits.grad()), 1e-6) << "T " << T << " holes " << holes;
      EXPECT_TRUE((H >= -1e-6).all().item<bool>() && (H <= std::log(T * (T - 1.0)) + 1e-5).all().item<bool>());
    }
}

// A sample whose logits are all −∞ but the drawn pairs' own: every later normaliser is the drawn
// pair's alone, so each draw is certain (log p = 0) and no gradient reaches the other logits.
TEST(PairLogProb, ADrawWithNoAlternativeIsCertain) {
  const int64_t T = 6, r = 3;
  auto logits = torch::full({1, T, T}, -kInf);
  auto src = torch::tensor({{0, 2, 4}}, torch::kLong), dst = torch::tensor({{1, 3, 5}}, torch::kLong);
  for (int64_t k = 0; k < r; ++k) logits[0][src[0][k].item<int64_t>()][dst[0][k].item<int64_t>()] = 0.5 * k;
  const Case c{logits, src, dst};
  const auto [out, grad] = by_parts(c, torch::ones({1, r}));
  // Draw 0 chooses among all three pairs; draw 2 has one left.
  EXPECT_NEAR(out[0][2].item<float>(), 0.0f, 1e-6);
  EXPECT_LT(out[0][0].item<float>(), 0.0f);
  EXPECT_TRUE(torch::isfinite(grad).all().item<bool>());
  const auto [ops, ops_grad] = by_ops(c, torch::ones({1, r}));
  EXPECT_LT(worst(out, ops), 1e-6);
  EXPECT_LT(worst(grad, ops_grad), 1e-6);
}

// The native backend's node (kernels/native/log_prob.cpp: the host parts as one autograd node)
// against the torch ops it replaces: values and gradients with respect to the logits, with and
// without −∞ holes; the same bits twice.
TEST(PairLogProb, TheNativeNodeGivesTheTorchOpsValuesAndGradients) {
  if (!native_kernels_built()) GTEST_SKIP() << "skipped: a build without the native kernels";
  for (int64_t T : {2, 3, 16, 33})
    for (int64_t r : {int64_t{1}, T / 2})
      for (bool holes : {false, true}) {
        const auto c = make_case(6, T, r, T * 7 + r, holes);
        const auto g = torch::randn({6, r});
        const auto [ops, ops_grad] = by_ops(c, g);
        auto native = [&] {
          KernelsScope kernels(Kernels::native);
          auto logits = c.logits.clone().requires_grad_(true);
          auto out = pair_log_prob(logits, c.src, c.dst, LogProbForm::exact);
          out.backward(g);
          return std::make_pair(out.detach(), logits.grad());
        };
        const auto once = native(), twice = native();
        ASSERT_LT(worst(once.first, ops), 1e-6) << "T " << T << " r " << r << " holes " << holes;
        ASSERT_LT(worst(once.second, ops_grad), 1e-6) << "T " << T << " r " << r << " holes " << holes;
        EXPECT_TRUE(torch::equal(once.first, twice.first) && torch::equal(once.second, twice.second));
      }
}

// On a GPU (skipped where this libtorch has none or sees none): the kernels' values and gradients
// against the torch ops on the CPU, the same bits twice, and at the paper's first layer (T = 256,
// r = 128), the entropy's too; where nvcc did not build them, the torch ops on the GPU against the CPU's.
TEST(PairLogProbOnAGpu, IsTheCpusAndTheSameTwice) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  const torch::Device gpu(torch::kCUDA, 0);
  for (auto [T, r] : {std::pair<int64_t, int64_t>{16, 8}, {33, 5}, {256, 128}}) {
    const auto c = make_case(8, T, r, T + r, true);
    const auto g = torch::randn({8, r});
    const auto [ops, ops_grad] = by_ops(c, g);
    auto on_gpu = [&] {
      KernelsScope kernels(Kernels::gpu);
      auto logits = c.logits.to(gpu).requires_grad_(true);
      auto out = pair_log_prob(logits, c.src.to(gpu), c.dst.to(gpu), LogProbForm::exact);
      out.backward(g.to(gpu));
      return std::make_pair(out.detach().cpu(), logits.grad().cpu());
    };
    const auto once = on_gpu(), twice = on_gpu();
    EXPECT_LT(worst(once.first, ops), 1e-5) << "T " << T;
    EXPECT_LT(worst(once.second, ops_grad), 1e-5) << "T " << T;
    EXPECT_TRUE(torch::equal(once.first, twice.first) && torch::equal(once.second, twice.second)) << "T " << T;
    // The entropy likewise.
    auto entropy_on = [&](const torch::Device& device, Kernels set) {
      KernelsScope kernels(set);
      auto logits = c.logits.to(device).requires_grad_(true);
      auto H = pair_entropy(logits);
      H.backward(g.narrow(1, 0, 1).squeeze(1).to(device));
      return std::make_pair(H.detach().cpu(), logits.grad().cpu());
    };
    const auto cpu_entropy = entropy_on(torch::kCPU, Kernels::portable), gpu_entropy = entropy_on(gpu, Kernels::gpu);
    EXPECT_LT(worst(gpu_entropy.first, cpu_entropy.first), 1e-5) << "T " << T;
    EXPECT_LT(worst(gpu_entropy.second, cpu_entropy.second), 1e-5) << "T " << T;
    const auto again = entropy_on(gpu, Kernels::gpu);
    EXPECT_TRUE(torch::equal(gpu_entropy.first, again.first) && torch::equal(gpu_entropy.second, again.second));
  }
}

}  // namespace
}  // namespace htm
