// The image adapter's lifter is LayerNorm → Linear → LayerNorm over each patch of
// [pixels; Fourier features], computed without materialising that vector. Check it against
// the plain composition, values and gradients, and the Fourier features against paper A.2.
#include <torch/torch.h>

#include "htm/adapter.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

std::shared_ptr<Adapter> make_image_adapter(int64_t patch, int64_t bands, const std::string& queries = "pixel") {
  static const Registry registry({HTM_PLUGIN_DIR});
  BuildContext ctx;
  ctx.dim = 16;
  ctx.heads = 2;
  ctx.sample_shape = {3, 8, 8};
  Params p({{"patch", patch},
            {"fourier_bands", bands},
            {"head_ratio", int64_t{1}},
            {"queries", queries},
            {"heads", int64_t{0}}});
  torch::manual_seed(0);
  return registry.create<Adapter>(PluginKind::adapter, "image", p, ctx);
}

torch::Tensor named(torch::nn::Module& m, const std::string& name) {
  for (const auto& p : m.named_parameters())
    if (p.key() == name) return p.value();
  for (const auto& b : m.named_buffers())
    if (b.key() == name) return b.value();
  ADD_FAILURE() << "no parameter or buffer " << name;
  return {};
}

TEST(ImageAdapter, LiftEqualsLayerNormLinearLayerNormOfTheConcatenatedPatch) {
  auto adapter = make_image_adapter(2, 4);
  {
    torch::NoGradGuard no_grad;  // non-trivial affine parameters, so every term matters
    for (auto& p : adapter->parameters()) p.uniform_(-0.5, 1.5);
  }
  auto input = (torch::rand({2, 3, 8, 8}) * 2 - 1).requires_grad_(true);
  auto fast = adapter->lift(input);

  auto positions = named(*adapter, "positions");
  auto x = torch::cat({input, positions.unsqueeze(0).expand({2, -1, -1, -1})}, 1);
  const int64_t K = x.size(1);
  x = x.view({2, K, 4, 2, 4, 2}).permute({0, 2, 4, 1, 3, 5}).reshape({2, 16, K * 4});
  auto ln = [](const torch::Tensor& t, const torch::Tensor& w, const torch::Tensor& b) {
    return torch::layer_norm(t, {t.size(-1)}, w, b, 1e-5);
  };
  auto plain = ln(torch::linear(ln(x, named(*adapter, "lift_norm.weight"), named(*adapter, "lift_norm.bias")),
                                named(*adapter, "lift_linear.weight"), named(*adapter, "lift_linear.bias")),
                  named(*adapter, "lift_out_norm.weight"), named(*adapter, "lift_out_norm.bias"));
  ASSERT_EQ(fast.sizes(), plain.sizes());
  EXPECT_TRUE(torch::allclose(fast, plain, 1e-4, 1e-4)) << (fast - plain).abs().max();

  auto g = torch::randn(fast.sizes());
  auto grads_fast = torch::autograd::grad(
      {fast}, {input, named(*adapter, "lift_linear.weight"), named(*adapter, "lift_norm.weight")}, {g});
  auto grads_plain = torch::autograd::grad(
      {plain}, {input, named(*adapter, "lift_linear.weight"), named(*adapter, "lift_norm.weight")}, {g});
  for (size_t k = 0; k < grads_fast.size(); ++k)
    EXPECT_TRUE(torch::allclose(grads_fast[k], grads_plain[k], 1e-3, 1e-4))
        << "gradient " << k << " differs by " << (grads_fast[k] - grads_plain[k]).abs().max();
}

TEST(ImageAdapter, FourierFeaturesFollowAppendixA2) {
  auto adapter = make_image_adapter(2, 4);
  auto f = named(*adapter, "positions");  // F×H×W: x, y, sin/cos(2π·y·ω), sin/cos(2π·x·ω)
  ASSERT_EQ(f.sizes(), (std::vector<int64_t>{2 + 4 * 4, 8, 8}));
  EXPECT_FLOAT_EQ(f[0][0][0].item<float>(), -1.0f);  // x at the left edge
  EXPECT_FLOAT_EQ(f[0][0][7].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(f[1][7][0].item<float>(), 1.0f);  // y at the bottom edge
  // ω linearly spaced from 1/max(H,W) = 1/8 to min(H,W)/2 = 4 in 4 bands: 1/8, 35/24, 67/24, 4.
  const double w_max = 4.0, y = f[1][3][0].item<double>();
  EXPECT_NEAR(f[2 + 3][3][0].item<double>(), std::sin(2 * M_PI * y * w_max), 1e-5);
  EXPECT_NEAR(f[2 + 4 + 0][3][0].item<double>(), std::cos(2 * M_PI * y / 8.0), 1e-5);
}

TEST(ImageAdapter, RejectsPatchesThatDoNotTileTheImage) { EXPECT_THROW(make_image_adapter(3, 4), Error); }

TEST(ImageAdapter, PatchQueriesPutEachPatchsPixelsInPlace) {
  // With the head's last layer zeroed, every patch's output is tanh of that layer's bias,
  // which is laid out channel-major within a patch: pixel (c, i, j) of every patch reads entry
  // c·n² + i·n + j. So the image must be that one n×n×channels tile repeated.
  auto adapter = make_image_adapter(2, 4, "patch");
  auto bias = torch::arange(12, torch::kFloat) / 12.0;
  {
    torch::NoGradGuard no_grad;
    named(*adapter, "head.3.weight").zero_();
    named(*adapter, "head.3.bias").copy_(bias);
  }
  auto out = adapter->unlift(torch::randn({2, 16, 16}));
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 8, 8}));
  auto tile = torch::tanh(bias).view({3, 2, 2});
  EXPECT_TRUE(torch::allclose(out, tile.repeat({1, 4, 4}).expand({2, 3, 8, 8})));
  EXPECT_THROW(make_image_adapter(2, 4, "pixels"), Error);
}

}  // namespace
}  // namespace htm
