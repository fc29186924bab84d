// Set comparison (htm/sets.h): the Hungarian assignment against brute force, and the matched
// and Chamfer errors' invariance to order and their gradients.
#include <algorithm>
#include <numeric>
#include <random>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/sets.h"
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

}  // namespace
}  // namespace htm
