// A whole block as one node (kernels/fused_linear.h: fused_block; the native kernels' block.cpp):
// the values and gradients of the layers one by one, bit for bit, for self- and cross-attention,
// where the block's input has other uses too; torch's own ops to rounding; and where the node
// does not apply (bf16, wide blocks, an MLP that recomputes, other kernels), an undefined result
// for the caller to run the layers.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "htm/layers.h"
#include "kernels/fused_linear.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"

// Its own namespace: the unity build batches this file with others that have a Case and a leaf().
namespace htm::fused_block_test {

struct Case {
  int64_t B, Tq, Tk, C, heads;
  bool cross;
};

std::string name(const Case& c) {
  return (c.cross ? "cross" : "self") + std::string(" B=") + std::to_string(c.B) + " Tq=" + std::to_string(c.Tq) +
         " Tk=" + std::to_string(c.Tk) + " C=" + std::to_string(c.C) + " heads=" + std::to_string(c.heads);
}

torch::Tensor leaf(std::vector<int64_t> sizes, double scale = 1.0, double offset = 0.0) {
  return (torch::randn(sizes) * scale + offset).requires_grad_();
}

// The block's weights as the model's modules hold them (an MLP of ratio 4), each a leaf.
BlockWeights weights(const Case& c) {
  const int64_t C = c.C;
  const double s = 1.0 / std::sqrt(static_cast<double>(C));
  return {leaf({C}, 0.1, 1.0),
          leaf({C}, 0.1),
          1e-5,
          leaf({C, C}, s),
          leaf({C}, 0.1),
          c.cross ? torch::Tensor() : leaf({2 * C, C}, s),
          c.cross ? torch::Tensor() : leaf({2 * C}, 0.1),
          leaf({C, C}, s),
          leaf({C}, 0.1),
          leaf({C}, 0.1, 1.0),
          leaf({C}, 0.1),
          1e-5,
          leaf({4 * C, C}, s),
          leaf({4 * C}, 0.1),
          leaf({C, 4 * C}, 0.5 * s),
          leaf({C}, 0.1),
          c.heads};
}

std::vector<torch::Tensor> leaves(const BlockWeights& w) {
  std::vector<torch::Tensor> all{w.norm1_weight, w.norm1_bias, w.wq, w.bq, w.wo, w.bo,
                                 w.norm2_weight, w.norm2_bias, w.w1, w.b1, w.w2, w.b2};
  if (w.wkv.defined()) all.insert(all.end(), {w.wkv, w.bkv});
  return all;
}

// The layers one by one, as the model's blocks ran them before fused_block (model/blocks.cpp):
// through the SDK's entry points, so the kernels in force.
torch::Tensor layers(const torch::Tensor& x, const torch::Tensor& keys, const torch::Tensor& values,
                     const BlockWeights& w) {
  torch::Tensor attended;
  if (keys.defined()) {
    const auto q = norm_linear(x, w.norm1_weight, w.norm1_bias, w.eps1, w.wq, w.bq);
    attended = fused_attention(q, keys, values, w.heads, 0.0, true);
  } else {
    auto [q, kv] = norm_linear2(x, w.norm1_weight, w.norm1_bias, w.eps1, w.wq, w.bq, w.wkv, w.bkv);
    const auto k_v = kv.chunk(2, -1);
    attended = fused_attention(q, k_v[0], k_v[1], w.heads, 0.0, true);
  }
  const auto h = x + linear(attended, w.wo, w.bo);
  return h + norm_mlp(h, w.norm2_weight, w.norm2_bias, w.eps2, w.w1, w.b1, w.w2, w.b2);
}

// torch's own ops: layer_norm, linear, softmax attention, gelu.
torch::Tensor torch_ops(const torch::Tensor& x, const torch::Tensor& keys, const torch::Tensor& values,
                        const BlockWeights& w) {
  const int64_t B = x.size(0), Tq = x.size(1), C = x.size(2), d = C / w.heads;
  const auto n = torch::layer_norm(x, {C}, w.norm1_weight, w.norm1_bias, w.eps1);
  const auto q = torch::linear(n, w.wq, w.bq);
  torch::Tensor k = keys, v = values;
  if (!keys.defined()) {
    const auto kv = torch::linear(n, w.wkv, w.bkv).chunk(2, -1);
    k = kv[0], v = kv[1];
  }
  auto split = [&](const torch::Tensor& t) { return t.view({B, t.size(1), w.heads, d}).transpose(1, 2); };
  const auto weights = torch::softmax(torch::matmul(split(q), split(k).transpose(-2, -1)) / std::sqrt(double(d)), -1);
  const auto attended = torch::matmul(weights, split(v)).transpose(1, 2).reshape({B, Tq, C});
  const auto h = x + torch::linear(attended, w.wo, w.bo);
  const auto m = torch::linear(
      torch::gelu(torch::linear(torch::layer_norm(h, {C}, w.norm2_weight, w.norm2_bias, w.eps2), w.w1, w.b1)), w.w2,
      w.b2);
  return h + m;
}

struct Pass {
  torch::Tensor y;
  std::vector<torch::Tensor> grads;  // the input's, the keys' and values' (cross), then the weights'
};

// One pass and its gradients. The block's input is x0·1.5 (not a leaf), used by the block and by
// the loss directly, so its gradient sums three terms, as the model's tokens do where the decoder
// attends to them too.
template <typename Block>
Pass run(const Case& c, int seed, Block block) {
  torch::manual_seed(seed);
  const auto x0 = leaf({c.B, c.Tq, c.C});
  torch::Tensor keys, values;
  if (c.cross) {
    auto kv = torch::randn({c.B, c.Tk, 2 * c.C});  // strided halves of one product, as the model makes them
    keys = kv.narrow(2, 0, c.C).requires_grad_(), values = kv.narrow(2, c.C, c.C).clone().requires_grad_();
  }
  const BlockWeights w = weights(c);
  const auto r1 = torch::randn({c.B, c.Tq, c.C}), r2 = torch::randn({c.B, c.Tq, c.C});
  const auto x = x0 * 1.5;
  const auto y = block(x, keys, values, w);
  ((y * r1).sum() + (x * r2).sum()).backward();
  Pass pass{y.detach(), {x0.grad()}};
  if (c.cross) pass.grads.insert(pass.grads.end(), {keys.grad(), values.grad()});
  for (const auto& t : leaves(w)) pass.grads.push_back(t.grad());
  return pass;
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() && torch::equal(a, b);
}

const std::vector<Case> kCases{
    {4, 16, 16, 16, 4, false},  // Trees and Crosses: width 16, 4 heads of 4, 16 tokens
    {3, 7, 7, 16, 4, false},    // fewer tokens (a merged level)
    {2, 16, 16, 64, 4, false},  // width 64: heads of 16
    {2, 49, 49, 64, 2, false},  // the quickstart's shape: heads of 32, too many keys for the small heads
    {4, 8, 16, 16, 4, true},    // a refinement: the new level over the old one
    {2, 16, 5, 64, 4, true},
};

TEST(FusedBlock, GivesTheLayersOneByOnesValuesAndGradientsBitForBit) {
  if (!native_kernels_built()) GTEST_SKIP() << "built without the native kernels";
  const KernelsScope native(Kernels::native);
  for (const Case& c : kCases) {
    int ran = 0;
    const auto fused = run(c, 3, [&](auto& x, auto& k, auto& v, auto& w) {
      auto y = fused_block(x, k, v, w);
      ran = y.defined();
      return y;
    });
    ASSERT_TRUE(ran) << name(c) << ": the native kernels run the block as one node";
    const auto apart = run(c, 3, layers);
    EXPECT_TRUE(same_bits(fused.y, apart.y)) << name(c) << ": " << (fused.y - apart.y).abs().max();
    ASSERT_EQ(fused.grads.size(), apart.grads.size());
    for (size_t i = 0; i < fused.grads.size(); ++i)
      EXPECT_TRUE(same_bits(fused.grads[i], apart.grads[i]))
          << name(c) << ": gradient " << i << " differs by " << (fused.grads[i] - apart.grads[i]).abs().max();
  }
}

TEST(FusedBlock, GivesTorchsOwnOpsValuesAndGradients) {
  if (!native_kernels_built()) GTEST_SKIP() << "built without the native kernels";
  const KernelsScope native(Kernels::native);
  for (const Case& c : kCases) {
    const auto fused = run(c, 4, [](auto& x, auto& k, auto& v, auto& w) { return fused_block(x, k, v, w); });
    const auto reference = run(c, 4, torch_ops);
    EXPECT_TRUE(torch::allclose(fused.y, reference.y, 1e-4, 1e-5)) << name(c);
    for (size_t i = 0; i < fused.grads.size(); ++i)
      EXPECT_TRUE(torch::allclose(fused.grads[i], reference.grads[i], 1e-3, 1e-4))
          << name(c) << ": gradient " << i << " differs by " << (fused.grads[i] - reference.grads[i]).abs().max();
  }
}

TEST(FusedBlock, IsUndefinedWhereItDoesNotApplyAndTheCallerRunsTheLayers) {
  if (!native_kernels_built()) GTEST_SKIP() << "built without the native kernels";
  torch::manual_seed(5);
  const Case narrow{2, 8, 8, 16, 4, false}, wide{2, 8, 8, 128, 4, false};
  const auto x = torch::randn({2, 8, 16});
  const BlockWeights w = weights(narrow);
  {
    const KernelsScope native(Kernels::native);
    EXPECT_TRUE(fused_block(x, {}, {}, w).defined());
    EXPECT_FALSE(fused_block(torch::randn({2, 8, 128}), {}, {}, weights(wide)).defined()) << "wider than 64";
    const auto keys = torch::randn({3, 8, 16});
    EXPECT_FALSE(fused_block(x, keys, keys, weights({2, 8, 8, 16, 4, true})).defined()) << "another batch of keys";
    {
      const PrecisionScope bf16(Precision::bf16);
      EXPECT_FALSE(fused_block(x, {}, {}, w).defined()) << "bf16 products";
    }
    {
      const RecomputeMlpsScope recompute(true);
      EXPECT_FALSE(fused_block(x, {}, {}, w).defined()) << "runtime.recompute = \"mlp\" with gradients";
      const torch::NoGradGuard no_grad;
      EXPECT_TRUE(fused_block(x, {}, {}, w).defined()) << "an evaluation keeps nothing either way";
    }
  }
  const KernelsScope portable(Kernels::portable);
  EXPECT_FALSE(fused_block(x, {}, {}, w).defined()) << "the portable kernels run the layers";
}

}  // namespace htm::fused_block_test
