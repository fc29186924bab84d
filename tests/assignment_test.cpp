// The native backend's set assignment (kernels/native/assignment.cpp): the Hungarian method in
// AVX-512 registers gives the reference's assignment (htm::hungarian, the portable backend's)
// for every set size it takes, ties included, and the reference's error for a NaN.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "config/device.h"
#include "htm/error.h"
#include "htm/sets.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"

namespace htm {
namespace {

torch::Tensor assignment_by(Kernels kernels, const torch::Tensor& cost) {
  KernelsScope scope(kernels);
  return backend_for(cost).min_cost_assignment(cost);
}

TEST(NativeAssignment, GivesTheReferencesAssignmentForEverySizeTiesIncluded) {
  if (!native_kernels_built()) GTEST_SKIP() << "skipped: a build without the native kernels";
  torch::manual_seed(5);
  int64_t sets = 0;
  for (int64_t n = 1; n <= 17; ++n) {
    // Continuous costs; small integers (many ties); squared distances of sets with repeated
    // points (whole rows and columns tied, as a decoder's copies give); and negative costs.
    const auto points = torch::randn({40, n, 2});
    const auto repeated = points.index_select(1, torch::randint(0, std::max<int64_t>(1, n / 2), {n}));
    const auto target = torch::randn({40, n, 2});
    for (const auto& cost :
         {torch::rand({200, n, n}).to(torch::kDouble), torch::randint(0, 3, {200, n, n}).to(torch::kDouble),
          torch::cdist(repeated, target).pow(2), -torch::rand({50, n, n}) * 1e3}) {
      const auto native = assignment_by(Kernels::native, cost), reference = assignment_by(Kernels::portable, cost);
      ASSERT_TRUE(torch::equal(native, reference)) << "n " << n;
      sets += cost.size(0);
    }
  }
  EXPECT_EQ(sets, 17 * 490);
}

TEST(NativeAssignment, IsAPermutationAndRefusesNaN) {
  if (!native_kernels_built()) GTEST_SKIP() << "skipped: a build without the native kernels";
  auto cost = torch::rand({8, 16, 16});
  const auto index = assignment_by(Kernels::native, cost);
  EXPECT_TRUE(torch::equal(std::get<0>(index.sort(1)), torch::arange(16).expand({8, 16})));
  cost[3][4][5] = std::nan("");
  EXPECT_THROW(assignment_by(Kernels::native, cost), NonFinite);
}

}  // namespace
}  // namespace htm
