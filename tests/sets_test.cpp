// Set comparison (htm/sets.h): the Hungarian assignment against brute force, the device's
// assignment (the gpu kernels') against the Hungarian one, and the matched and Chamfer errors'
// invariance to order and their gradients.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include <torch/torch.h>

#include "config/device.h"
#include "htm/error.h"
#include "htm/sets.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "kernels/set_assignment.h"
#include "test_util.h"

namespace htm {
namespace {

double assignment_cost(const std::vector<double>& cost, int64_t n, const std::vector<int64_t>& a) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += cost[i * n + a[i]];
  return total;
}

TEST(Hungarian, FindsTheCheapestAssignmentFoundByBruteForce) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 10);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = 1 + trial % 7;
    std::vector<double> cost(n * n);
    for (auto& c : cost) c = trial % 3 == 0 ? std::floor(u(rng)) : u(rng);  // ties too
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    double best = 1e300;
    do best = std::min(best, assignment_cost(cost, n, perm));
    while (std::next_permutation(perm.begin(), perm.end()));
    const auto found = hungarian(cost, n);
    std::vector<int64_t> sorted = found;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation";
    EXPECT_NEAR(assignment_cost(cost, n, found), best, 1e-9) << "n = " << n;
  }
  EXPECT_THROW(hungarian({1, 2, 3}, 2), Error);
}

TEST(SetErrors, IgnoreOrderAndMeasureDistance) {
  torch::manual_seed(0);
  auto target = torch::rand({3, 7, 4}) * 2 - 1;
  auto shuffled = target.index_select(1, torch::randperm(7));
  EXPECT_NEAR(matched_mse(shuffled, target).abs().max().item<double>(), 0, 1e-12);
  EXPECT_NEAR(chamfer(shuffled, target).abs().max().item<double>(), 0, 1e-6);
  EXPECT_GT((shuffled - target).pow(2).mean().item<double>(), 0.1);  // plain MSE would not be 0
  // A constant shift by 0.5 in every coordinate: both errors are 0.25 (matching stays the identity).
  auto moved = shuffled + 0.5;
  EXPECT_NEAR(matched_mse(moved, target).mean().item<double>(), 0.25, 1e-6);
  EXPECT_LE(chamfer(moved, target).max().item<double>(), 0.25 + 1e-6);
  auto index = match_sets(shuffled, target);
  EXPECT_TRUE(torch::equal(target.gather(1, index.unsqueeze(-1).expand_as(target)), shuffled));
}

TEST(SetErrors, GradientsReachThePrediction) {
  torch::manual_seed(1);
  auto target = torch::rand({2, 5, 2});
  for (auto* error : {&matched_mse, &chamfer}) {
    auto prediction = torch::rand({2, 5, 2}).requires_grad_();
    auto value = (*error)(prediction, target);
    ASSERT_EQ(value.sizes(), (std::vector<int64_t>{2}));
    value.sum().backward();
    EXPECT_GT(prediction.grad().abs().sum().item<double>(), 0);
  }
  EXPECT_THROW(matched_mse(torch::rand({2, 5, 2}), torch::rand({2, 4, 2})), Error);
}

// The gpu kernels' assignment (dynamic programming over subsets, on the tensor's device) against
// the Hungarian method: the same least cost always, the same assignment where costs do not tie.
TEST(DeviceAssignment, CostsWhatTheHungarianAssignmentCostsAndIsTheSameWithoutTies) {
  torch::manual_seed(4);
  for (int64_t n : {1, 2, 3, 5, 8, 11, 16}) {
    const int64_t B = n == 16 ? 3 : 12;
    for (bool ties : {false, true}) {
      auto cost = torch::rand({B, n, n}, torch::kDouble) * 10;
      if (ties) cost = cost.floor();
      const auto found = gpu::min_cost_assignment(cost);
      ASSERT_EQ(found.sizes(), (std::vector<int64_t>{B, n}));
      for (int64_t b = 0; b < B; ++b) {
        const auto c = cost[b].contiguous();
        const std::vector<double> flat(c.data_ptr<double>(), c.data_ptr<double>() + n * n);
        const auto reference = hungarian(flat, n);
        std::vector<int64_t> mine(found[b].data_ptr<int64_t>(), found[b].data_ptr<int64_t>() + n), sorted = mine;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation at n = " << n;
        EXPECT_NEAR(assignment_cost(flat, n, mine), assignment_cost(flat, n, reference), 1e-9)
            << "n = " << n << (ties ? ", integer costs" : "");
        if (!ties) EXPECT_EQ(mine, reference) << "n = " << n << ", sample " << b;
      }
    }
  }
  // The layers take a batch over one launch's part (162 sets of 16) in parts: the same assignments.
  auto many = torch::rand({170, 16, 16}, torch::kDouble);
  EXPECT_TRUE(torch::equal(gpu::min_cost_assignment_layers(many), gpu::min_cost_assignment(many)));
  EXPECT_EQ(gpu::min_cost_assignment(torch::rand({0, 5, 5})).sizes(), (std::vector<int64_t>{0, 5}));
  EXPECT_THROW(gpu::min_cost_assignment(torch::rand({1, 17, 17})), Error);
  EXPECT_THROW(gpu::min_cost_assignment(torch::rand({1, 3, 4})), Error);
}

TEST(DeviceAssignment, ANonFiniteCostGivesIndicesInRangeAndANonFiniteError) {
  auto prediction = torch::rand({2, 6, 2});
  prediction[1][3][0] = std::numeric_limits<float>::quiet_NaN();
  KernelsScope kernels(Kernels::gpu);
  const auto index = match_sets(prediction, torch::rand({2, 6, 2}));
  EXPECT_GE(index.min().item<int64_t>(), 0);
  EXPECT_LT(index.max().item<int64_t>(), 6);
  const auto error = matched_mse(prediction, torch::rand({2, 6, 2}));
  EXPECT_TRUE(std::isfinite(error[0].item<double>()));
  EXPECT_TRUE(std::isnan(error[1].item<double>()));
}

// The CUDA kernel's steps (kernels/set_assignment.h) run on the CPU one set after another
// (assignment::assign_on_host, min_cost_assignment's path for CPU tensors): the assignment of its
// layers in torch ops, index for index, ties, infinities and NaN included. On a GPU,
// DeviceAssignment.OnAGpu* checks the kernel against the CPU.
TEST(DeviceAssignment, TheKernelsStepsTakeTheLayersAssignment) {
  torch::manual_seed(7);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t n = 0; n <= assignment::kMaxElements; ++n)
    for (int kind = 0; kind < 4; ++kind) {
      const int64_t B = n >= 14 ? 2 : 6;
      auto cost = torch::rand({B, n, n}, torch::kDouble) * 10;
      if (kind >= 1) cost = cost.floor();  // ties: many assignments cost the least
      if (kind >= 2 && n > 0) cost.masked_fill_(torch::rand({B, n, n}) < 0.2, inf);
      if (kind == 2 && n > 1) cost[0].fill_(inf);  // every assignment infinite
      if (kind == 3 && n > 0) cost.masked_fill_(torch::rand({B, n, n}) < 0.1, nan), cost[B - 1].fill_(-inf);
      const auto layers = gpu::min_cost_assignment_layers(cost);
      auto steps = torch::full({B, n}, -7, torch::kLong);
      std::vector<double> f(size_t{1} << n);
      std::vector<uint8_t> choice(size_t{1} << n);
      const auto c = cost.contiguous();
      assignment::assign_on_host(c.data_ptr<double>(), B, n, steps.data_ptr<int64_t>(), f.data(), choice.data());
      ASSERT_TRUE(torch::equal(gpu::min_cost_assignment(cost), steps)) << "n " << n << " kind " << kind;
      ASSERT_TRUE(torch::equal(steps, layers)) << "n " << n << " kind " << kind << "\nsteps\n"
                                               << steps << "\nlayers\n"
                                               << layers;
    }
}

// What the point-set loss gets: under the gpu kernels the device's matching, the Hungarian one's
// otherwise; inside a capture, sets too large for the device are refused by name.
TEST(DeviceAssignment, MatchedErrorsAgreeAcrossKernelsAndACaptureRefusesAHostMatching) {
  torch::manual_seed(5);
  auto prediction = torch::rand({4, 16, 2}, torch::requires_grad()), target = torch::rand({4, 16, 2});
  auto error_and_gradient = [&](Kernels set) {
    KernelsScope kernels(set);
    auto value = matched_mse(prediction, target);
    value.sum().backward();
    auto grad = prediction.grad().clone();
    prediction.mutable_grad().zero_();
    return std::make_pair(value.detach(), grad);
  };
  const auto [host, host_grad] = error_and_gradient(Kernels::portable);
  const auto [device, device_grad] = error_and_gradient(Kernels::gpu);
  EXPECT_TRUE(torch::equal(host, device));
  EXPECT_TRUE(torch::equal(host_grad, device_grad));
  KernelsScope kernels(Kernels::gpu);
  GraphDraws capture(/*fixed_rounds=*/true);
  EXPECT_TRUE(matched_mse(prediction, target).defined());  // N = 16: on the device
  try {
    matched_mse(torch::rand({1, 17, 2}), torch::rand({1, 17, 2}));
    FAIL() << "a host matching ran inside a capture";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("N = 17 elements runs on the host"), std::string::npos) << e.what();
  }
}

// On a GPU (skipped where this libtorch has none or sees none): the same assignments as on the
// CPU, ties and non-finite costs included, and a matched error whose value and gradient are the CPU's.
TEST(DeviceAssignment, OnAGpuItTakesTheCpusAssignment) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  torch::manual_seed(6);
  auto cost = torch::rand({64, 16, 16}, torch::kDouble);
  EXPECT_TRUE(torch::equal(gpu::min_cost_assignment(cost.cuda()).cpu(), gpu::min_cost_assignment(cost)));
  // Ties, infinities and NaN: the same pick among equal costs (the kernel's, or the layers' where
  // HTM_CUDA_ASSIGNMENT=0), at every size up to 16; and an evaluation batch of 256 sets.
  for (int64_t n : {1, 2, 5, 9, 16}) {
    auto hard = (torch::rand({8, n, n}, torch::kDouble) * 4).floor();
    hard.masked_fill_(torch::rand({8, n, n}) < 0.1, std::numeric_limits<double>::infinity());
    hard.masked_fill_(torch::rand({8, n, n}) < 0.05, std::numeric_limits<double>::quiet_NaN());
    EXPECT_TRUE(torch::equal(gpu::min_cost_assignment(hard.cuda()).cpu(), gpu::min_cost_assignment(hard))) << n;
  }
  auto batch = torch::rand({256, 16, 16}, torch::kDouble);
  EXPECT_TRUE(torch::equal(gpu::min_cost_assignment(batch.cuda()).cpu(), gpu::min_cost_assignment(batch)));
  KernelsScope kernels(Kernels::gpu);
  auto prediction = torch::rand({8, 16, 2}), target = torch::rand({8, 16, 2});
  auto on_gpu = prediction.cuda().requires_grad_();
  auto value = matched_mse(on_gpu, target.cuda());
  value.sum().backward();
  EXPECT_TRUE(torch::allclose(value.cpu(), matched_mse(prediction, target), 1e-6, 1e-7));
  auto on_cpu = prediction.clone().requires_grad_();
  matched_mse(on_cpu, target).sum().backward();
  EXPECT_TRUE(torch::allclose(on_gpu.grad().cpu(), on_cpu.grad(), 1e-6, 1e-7));
}

}  // namespace
}  // namespace htm
