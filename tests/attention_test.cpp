// The fused attention against the plain computation: values and gradients, per-batch and
// shared (broadcast) queries; its dropout path through exact linearity in V.
#include <functional>
#include <string>

#include <torch/torch.h>

#include "htm/layers.h"
#include "kernels/counter_rng.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"
#if HTM_NATIVE_KERNELS
#include "kernels/native/attention_small.h"
#include "kernels/native/softmax_rows.h"
#endif
#include "test_util.h"

namespace htm {
namespace {

torch::Tensor plain_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t heads) {
  const int64_t B = k.size(0), Tq = q.size(1), Tk = k.size(1), C = q.size(2), d = C / heads;
  auto split = [&](const torch::Tensor& t, int64_t n) { return t.view({t.size(0), n, heads, d}).transpose(1, 2); };
  auto w = torch::softmax(torch::matmul(split(q, Tq), split(k, Tk).transpose(-2, -1)) / std::sqrt(double(d)), -1);
  return torch::matmul(w, split(v, Tk)).transpose(1, 2).reshape({B, Tq, C});
}

struct Inputs {
  torch::Tensor q, k, v;
};

Inputs inputs(int64_t bq, int64_t B, int64_t Tq, int64_t Tk, int64_t C) {
  torch::manual_seed(1);
  // k and v as strided halves of one projection, the way the model produces them.
  auto kv = torch::randn({B, Tk, 2 * C});
  return {torch::randn({bq, Tq, C}).requires_grad_(true), kv.narrow(2, 0, C).clone().requires_grad_(true),
          kv.narrow(2, C, C).requires_grad_(true)};
}

TEST(FusedAttention, MatchesPlainAttentionValuesAndGradients) {
  for (auto [bq, B, Tq, Tk, C, h] :
       std::vector<std::array<int64_t, 6>>{{3, 3, 70, 33, 16, 2},
                                           {1, 4, 130, 9, 12, 3},
                                           {2, 2, 5, 200, 8, 1},
                                           // small heads (native/attention_small.h): d ≤ 16, ≤ 16 keys
                                           {2, 2, 16, 16, 16, 4},
                                           {1, 3, 12, 7, 32, 2},
                                           {3, 3, 9, 16, 5, 1}}) {
    Inputs in = inputs(bq, B, Tq, Tk, C);
    auto fused = fused_attention(in.q, in.k, in.v, h, 0.0, true);
    auto plain = plain_attention(in.q, in.k, in.v, h);
    ASSERT_EQ(fused.sizes(), plain.sizes());
    EXPECT_TRUE(torch::allclose(fused, plain, 1e-4, 1e-5)) << (fused - plain).abs().max();
    auto g = torch::randn(plain.sizes());
    auto gf = torch::autograd::grad({fused}, {in.q, in.k, in.v}, {g});
    auto gp = torch::autograd::grad({plain}, {in.q, in.k, in.v}, {g});
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(gf[i].sizes(), gp[i].sizes());
      EXPECT_TRUE(torch::allclose(gf[i], gp[i], 1e-3, 1e-4))
          << "grad " << i << " (bq=" << bq << ") differs by " << (gf[i] - gp[i]).abs().max();
    }
  }
}

TEST(FusedAttention, DropoutIsReproducibleUnbiasedAndBackpropagatesThroughItsMask) {
  Inputs in = inputs(2, 2, 40, 30, 8);
  const double p = 0.3;
  torch::manual_seed(7);
  auto a = fused_attention(in.q, in.k, in.v, 2, p, true);
  torch::manual_seed(7);
  auto b = fused_attention(in.q, in.k, in.v, 2, p, true);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::allclose(a, plain_attention(in.q, in.k, in.v, 2), 1e-3, 1e-3));
  EXPECT_TRUE(torch::equal(fused_attention(in.q, in.k, in.v, 2, p, false).detach(),
                           fused_attention(in.q, in.k, in.v, 2, 0.0, true).detach()));

  // The mean over masks is the undropped output.
  torch::NoGradGuard no_grad;
  auto mean = torch::zeros_like(a);
  for (int s = 0; s < 400; ++s) mean += fused_attention(in.q, in.k, in.v, 2, p, true) / 400.0;
  EXPECT_LT((mean - plain_attention(in.q, in.k, in.v, 2)).abs().mean().item<double>(), 0.02);
}

// Small heads in registers draw the blocked path's masks: against the portable kernels (the
// same masks, bit for bit, kernels/kernels.h) the same values and gradients, to rounding.
TEST(FusedAttention, SmallHeadsDropTheSameWeightsAsThePortableKernels) {
  Inputs in = inputs(2, 2, 16, 16, 16);
  auto g = torch::randn({2, 16, 16});
  std::vector<torch::Tensor> out, grads;
  for (const Kernels k : {Kernels::native, Kernels::portable}) {
    KernelsScope kernels(k);
    torch::manual_seed(11);
    out.push_back(fused_attention(in.q, in.k, in.v, 4, 0.3, true));
    for (const auto& grad : torch::autograd::grad({out.back()}, {in.q, in.k, in.v}, {g})) grads.push_back(grad);
  }
  EXPECT_TRUE(torch::allclose(out[0], out[1], 1e-4, 1e-5)) << (out[0] - out[1]).abs().max();
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(torch::allclose(grads[i], grads[i + 3], 1e-3, 1e-4))
        << i << ": " << (grads[i] - grads[i + 3]).abs().max();
}

#if HTM_NATIVE_KERNELS
// f(head, where) over 100 small heads: d 1–16 channels, 1–16 keys, 1–40 queries, their rows
// 3d + 1 apart as in a packed q|k|v projection (odd on purpose), drawn from torch's generator.
// Stops at the first fatal failure; returns the heads it took.
int for_each_small_head(const std::function<void(const SmallHead&, const std::string&)>& f) {
  int cases = 0;
  for (int64_t d : {1, 3, 4, 8, 16})
    for (int64_t tk : {1, 2, 7, 16})
      for (int64_t tq : {1, 5, 16, 17, 40}) {
        const int64_t ld = 3 * d + 1;
        auto x = torch::randn({tq + 2 * tk, ld}) * 2;
        const float* p = x.data_ptr<float>();
        f(SmallHead{p, p + tq * ld + d, p + (tq + tk) * ld + 2 * d, ld, ld, ld, tq, tk, d},
          "d " + std::to_string(d) + " tk " + std::to_string(tk) + " tq " + std::to_string(tq));
        if (::testing::Test::HasFatalFailure()) return cases;
        ++cases;
      }
  return cases;
}

// A small head without dropout runs a lane per query row (attention_small.cpp's
// forward_by_queries); with dropout on, a row at a time. A mask that keeps every weight at scale 1
// (threshold 0) leaves the row kernel's weights as they are: both give the same bits.
TEST(SmallHeads, ALanePerQueryGivesTheRowKernelsBits) {
  if (!small_heads_fit(4, 16)) GTEST_SKIP() << "skipped: no AVX-512 rows on this CPU";
  torch::manual_seed(7);
  const int cases = for_each_small_head([](const SmallHead& h, const std::string& where) {
    const int64_t tq = h.tq, d = h.d;
    auto lanes = torch::full({tq, d + 1}, 9.0f), rows = torch::full({tq, d + 1}, 9.0f);
    auto lse_lanes = torch::empty({tq}), lse_rows = torch::empty({tq});
    small_head_forward(h, SmallDropout{false, 0, 0, 0, 1.0f}, lanes.data_ptr<float>(), d + 1,
                       lse_lanes.data_ptr<float>());
    small_head_forward(h, SmallDropout{true, 11, 0, 0, 1.0f}, rows.data_ptr<float>(), d + 1,
                       lse_rows.data_ptr<float>());
    ASSERT_TRUE(torch::equal(lanes, rows)) << where << ": outputs (or the column past them) differ";
    ASSERT_TRUE(torch::equal(lse_lanes, lse_rows)) << where << ": log-sum-exps differ";
  });
  EXPECT_EQ(cases, 100);
}

// The same for backward (attention_small.cpp's backward_by_queries, for d ≤ 8): dQ, dK and dV
// added onto what the buffers held, bit for bit the row kernel's, over the same 100 shapes.
TEST(SmallHeads, ALanePerQueryBackwardGivesTheRowKernelsBits) {
  if (!small_heads_fit(4, 16)) GTEST_SKIP() << "skipped: no AVX-512 rows on this CPU";
  torch::manual_seed(8);
  const int cases = for_each_small_head([](const SmallHead& h, const std::string& where) {
    const int64_t tq = h.tq, tk = h.tk, d = h.d;
    auto out = torch::empty({tq, d}), lse = torch::empty({tq});
    small_head_forward(h, SmallDropout{false, 0, 0, 0, 1.0f}, out.data_ptr<float>(), d, lse.data_ptr<float>());
    auto g = torch::randn({tq, d + 2});  // rows d + 2 apart
    const auto start_q = torch::randn({tq, d + 1}), start_kv = torch::randn({2, tk, d + 1});
    auto lanes_q = start_q.clone(), rows_q = start_q.clone();
    auto lanes_kv = start_kv.clone(), rows_kv = start_kv.clone();
    small_head_backward(h, SmallDropout{false, 0, 0, 0, 1.0f}, g.data_ptr<float>(), d + 2, lse.data_ptr<float>(),
                        lanes_q.data_ptr<float>(), d + 1, lanes_kv[0].data_ptr<float>(), lanes_kv[1].data_ptr<float>(),
                        d + 1);
    small_head_backward(h, SmallDropout{true, 11, 0, 0, 1.0f}, g.data_ptr<float>(), d + 2, lse.data_ptr<float>(),
                        rows_q.data_ptr<float>(), d + 1, rows_kv[0].data_ptr<float>(), rows_kv[1].data_ptr<float>(),
                        d + 1);
    if (tk > 1)
      ASSERT_FALSE(torch::equal(lanes_q, start_q)) << where << ": nothing was added to dQ";  // one key: dS = 0
    ASSERT_TRUE(torch::equal(lanes_q, rows_q)) << where << ": dQ (or the column past it) differs";
    ASSERT_TRUE(torch::equal(lanes_kv, rows_kv)) << where << ": dK or dV (or the column past them) differs";
  });
  EXPECT_EQ(cases, 100);
}
#endif

TEST(FusedAttention, DropoutGradientsMatchFiniteDifferences) {
  // Output is linear in V for a fixed mask: <dV, Δ> must equal <dO, O(V+Δ) − O(V)>.
  Inputs in = inputs(2, 2, 17, 11, 8);
  auto grad_out = torch::randn({2, 17, 8});
  torch::manual_seed(3);
  auto out = fused_attention(in.q, in.k, in.v, 2, 0.4, true);
  auto grads = torch::autograd::grad({out}, {in.q, in.k, in.v}, {grad_out});
  auto delta = torch::randn(in.v.sizes());
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  auto shifted = fused_attention(in.q, in.k, in.v + delta, 2, 0.4, true);
  EXPECT_NEAR((grads[2] * delta).sum().item<double>(), (grad_out * (shifted - out)).sum().item<double>(), 1e-3);
  // Q and K: central differences along a random direction.
  for (int which : {0, 1}) {
    auto dir = torch::randn(which == 0 ? in.q.sizes() : in.k.sizes()) * 1e-2;
    auto eval = [&](double sign) {
      torch::manual_seed(3);
      return which == 0 ? fused_attention(in.q + sign * dir, in.k, in.v, 2, 0.4, true)
                        : fused_attention(in.q, in.k + sign * dir, in.v, 2, 0.4, true);
    };
    const double numeric = (grad_out * (eval(1) - eval(-1))).sum().item<double>() / 2;
    const double analytic = (grads[which] * dir).sum().item<double>();
    EXPECT_NEAR(analytic, numeric, 2e-3 + 0.02 * std::abs(numeric)) << (which == 0 ? "dQ" : "dK");
  }
}

TEST(Linear, MatchesTorchLinearValuesAndGradients) {
  PrecisionScope fp32(Precision::fp32);  // a test before it in this process may have left bf16 in force
  torch::manual_seed(2);
  Linear layer(24, 10);
  for (auto shape : std::vector<std::vector<int64_t>>{{7, 24}, {3, 5, 24}, {1, 24}}) {
    auto x = torch::randn(shape, torch::requires_grad());
    auto ours = layer->forward(x);
    auto ref = torch::linear(x, layer->weight, layer->bias);
    ASSERT_EQ(ours.sizes(), ref.sizes());
    EXPECT_TRUE(torch::allclose(ours, ref, 1e-5, 1e-5)) << (ours - ref).abs().max() << " for " << x.sizes();
    auto g = torch::randn(ref.sizes());
    auto a = torch::autograd::grad({ours}, {x, layer->weight, layer->bias}, {g});
    auto b = torch::autograd::grad({ref}, {x, layer->weight, layer->bias}, {g});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-4, 1e-5)) << "grad " << i;
  }
  // Without bias, and with an input that needs no gradient (only the weight's is computed).
  Linear no_bias(24, 3, false);
  EXPECT_FALSE(no_bias->bias.defined());
  auto y = no_bias->forward(torch::randn({4, 24}));
  y.sum().backward();
  EXPECT_TRUE(no_bias->weight.grad().defined());
  // Same initialisation bounds as torch::nn::Linear: U(-1/sqrt(in), 1/sqrt(in)).
  EXPECT_LE(layer->weight.abs().max().item<double>(), 1.0 / std::sqrt(24.0));
}

#if HTM_NATIVE_KERNELS
// The row kernels behind it (AVX-512 where the CPU has it) against plain computations: the
// dropout mask bit for bit against the counter stream, over lengths with and without a tail.
TEST(SoftmaxRows, MatchTheirPlainDefinitions) {
  torch::manual_seed(4);
  for (int64_t n : {1, 5, 16, 31, 32, 77, 256}) {
    auto x = torch::randn({n}) * 4;
    auto y = x.clone();
    const float lse = softmax_row(y.data_ptr<float>(), n);
    EXPECT_TRUE(torch::allclose(y, torch::softmax(x, 0), 1e-5, 1e-7)) << n;
    EXPECT_NEAR(lse, torch::logsumexp(x, 0).item<float>(), 1e-5) << n;
    auto e = x.clone();
    exp_row(e.data_ptr<float>(), n, 1.5f);
    EXPECT_TRUE(torch::allclose(e, torch::exp(x - 1.5f), 1e-6, 1e-7)) << n;
    auto dp = torch::randn({n}), ds = dp.clone();
    softmax_grad_row(y.data_ptr<float>(), ds.data_ptr<float>(), n);
    EXPECT_TRUE(torch::allclose(ds, y * (dp - (y * dp).sum()), 1e-5, 1e-6)) << n;
    for (double p : {0.0, 0.1, 0.5}) {
      const uint32_t threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
      auto w = torch::ones({n});
      mask_row(w.data_ptr<float>(), n, 1234, 7, threshold, 2.0f);
      const uint64_t base = counter_bits(1234, 7);
      for (int64_t j = 0; j < n; ++j) {
        const uint64_t bits = splitmix64(base + static_cast<uint64_t>(j - j % 4));
        const float expected = ((bits >> (16 * (j % 4))) & 0xffff) >= threshold ? 2.0f : 0.0f;
        ASSERT_EQ(w[j].item<float>(), expected) << "n " << n << " p " << p << " entry " << j;
      }
    }
  }
}

#endif

}  // namespace
}  // namespace htm
