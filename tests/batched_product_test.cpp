// The native backend's batched product (kernels/native/batched_product.cpp): torch::bmm's values
// and both gradients bit for bit, over the shapes and layouts a policy's bilinear logits, their
// backward and the point-set losses give it (row-major and transposed operands, a batch
// stride of 0, the small-product loop below 400 multiply-adds an entry and the BLAS above it),
// and torch::bmm itself where an operand has no unit stride.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <tuple>

#include "config/device.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"

namespace htm {
namespace {

// The native backend's product (runtime.kernels = "native" for the call).
torch::Tensor native_product(const torch::Tensor& a, const torch::Tensor& b) {
  KernelsScope kernels(Kernels::native);
  return backend_for(a).batched_product(a, b);
}

// {out, da, db} of a·b for upstream gradient g, by `product`.
template <typename Product>
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> run(Product product, const torch::Tensor& a0,
                                                            const torch::Tensor& b0, const torch::Tensor& g) {
  auto a = a0.detach().clone().requires_grad_(true), b = b0.detach().clone().requires_grad_(true);
  auto out = product(a, b);
  out.backward(g);
  return {out.detach(), a.grad(), b.grad()};
}

// a B×m×k and b B×k×n, each row-major or the transpose of a row-major tensor.
std::pair<torch::Tensor, torch::Tensor> operands(int64_t B, int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
  auto a = ta ? torch::randn({B, k, m}).transpose(1, 2) : torch::randn({B, m, k});
  auto b = tb ? torch::randn({B, n, k}).transpose(1, 2) : torch::randn({B, k, n});
  return {a, b};
}

TEST(BatchedProduct, TheNativeNodeGivesTorchBmmsBitsForwardAndBackward) {
  if (!native_kernels_built()) GTEST_SKIP() << "skipped: a build without the native kernels";
  torch::manual_seed(3);
  int cases = 0, small = 0;
  // {B, m, k, n}: the bilinear logits at T = 16, 8, 4, 2 and width 16, a wider policy, a
  // point set against its target, single rows and columns.
  for (auto [B, m, k, n] : {std::array<int64_t, 4>{64, 16, 16, 16},
                            {64, 8, 16, 8},
                            {64, 4, 16, 4},
                            {16, 2, 16, 2},
                            {8, 49, 64, 49},
                            {16, 16, 2, 16},
                            {5, 1, 30, 20},
                            {5, 20, 30, 1},
                            {3, 7, 1, 9}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const auto [a, b] = operands(B, m, k, n, ta, tb);
        const auto g = torch::randn({B, m, n});
        const auto [out, da, db] = run([](auto& x, auto& y) { return torch::bmm(x, y); }, a, b, g);
        const auto [nout, nda, ndb] = run(native_product, a, b, g);
        const auto where = "B " + std::to_string(B) + " m " + std::to_string(m) + " k " + std::to_string(k) + " n " +
                           std::to_string(n) + " ta " + std::to_string(ta) + " tb " + std::to_string(tb);
        ASSERT_TRUE(torch::equal(out, nout)) << where << ": forward";
        ASSERT_TRUE(torch::equal(da, nda)) << where << ": grad of a";
        ASSERT_TRUE(torch::equal(db, ndb)) << where << ": grad of b";
        ASSERT_EQ(nout.sizes(), out.sizes());
        const auto node = native_product(a.detach().requires_grad_(true), b).grad_fn()->name();
        ASSERT_NE(node.find("BatchedProduct"), std::string::npos) << where << ": not the node but " << node;
        ++cases, small += m * k * n < 400;
      }
  EXPECT_EQ(cases, 36);
  EXPECT_GT(small, 8);  // both paths taken
}

TEST(BatchedProduct, ABroadcastOperandAndOneWithoutAUnitStrideGiveBmmsValues) {
  if (!native_kernels_built()) GTEST_SKIP() << "skipped: a build without the native kernels";
  torch::manual_seed(4);
  auto shared = torch::randn({1, 16, 16}).expand({8, 16, 16});  // batch stride 0
  auto b = torch::randn({8, 16, 16});
  EXPECT_TRUE(torch::equal(native_product(shared, b), torch::bmm(shared, b)));
  auto strided = torch::randn({8, 32, 32}).slice(1, 0, 32, 2).slice(2, 0, 32, 2);  // strides 2 and 64
  EXPECT_TRUE(torch::equal(native_product(strided, b), torch::bmm(strided, b)));
  auto doubles = torch::randn({2, 16, 16}, torch::kDouble);  // not the node's type: torch::bmm
  EXPECT_TRUE(torch::equal(native_product(doubles, doubles), torch::bmm(doubles, doubles)));
}

}  // namespace
}  // namespace htm
