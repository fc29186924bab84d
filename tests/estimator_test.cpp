// The score-function surrogate (paper eq. 2-4) on a case small enough to enumerate: 3 tokens,
// one pair merged, so 6 actions. Its gradient must equal eq. 4 for a fixed draw and, averaged
// over draws, the exact gradient of the expected loss.
#include <torch/torch.h>

#include "config/settings.h"
#include "htm/policy.h"
#include "test_util.h"
#include "train/estimator.h"

namespace htm {
namespace {

constexpr int64_t kT = 3;

struct Case {
  torch::Tensor theta;  // 1×3×3 merge logits (the policy's parameters here)
  torch::Tensor cost;   // 9 per-action constants, c[i*3+j]
};

Case make_case() {
  torch::manual_seed(21);
  return {torch::randn({1, kT, kT}).requires_grad_(true), torch::rand({kT * kT}) * 4.0};
}

// g(Y, θ) = c_Y + ½ θ₀₁²: depends on the action and, differentiably, on θ (the eq. 3 second term).
torch::Tensor loss_of(const Case& c, const torch::Tensor& src, const torch::Tensor& dst) {
  return c.cost.index_select(0, (src * kT + dst).view(-1)) + 0.5 * c.theta[0][0][1].pow(2);
}

torch::Tensor exact_gradient(const Case& c) {
  // ∇ Σ_Y p_Y(θ) g(Y, θ), by enumerating the 6 actions.
  std::vector<int64_t> s, d;
  for (int64_t i = 0; i < kT; ++i)
    for (int64_t j = 0; j < kT; ++j)
      if (i != j) s.push_back(i), d.push_back(j);
  auto src = torch::tensor(s).view({1, -1}), dst = torch::tensor(d).view({1, -1});
  auto p = pair_log_prob(c.theta, src, dst).exp().view(-1);
  auto expected = (p * loss_of(c, src, dst)).sum();
  return torch::autograd::grad({expected}, {c.theta})[0];
}

// Average surrogate gradient over `batches` batches of `batch` draws each.
torch::Tensor monte_carlo_gradient(const Case& c, const EstimatorSettings& settings, int64_t batches,
                                   int64_t batch, bool with_score_term = true) {
  Estimator estimator(settings);
  const int64_t n = batches * batch;
  auto logits = c.theta.expand({n, kT, kT});
  auto [src, dst] = sample_disjoint_pairs(logits, 1, at::make_generator<at::CPUGeneratorImpl>(8));
  auto log_prob = pair_log_prob(logits, src, dst).view({batches, batch});
  auto g = loss_of(c, src, dst).view({batches, batch});
  torch::Tensor total = torch::zeros({});
  for (int64_t k = 0; k < batches; ++k)
    total = total + estimator.objective(g[k], with_score_term ? log_prob[k] : torch::Tensor());
  return torch::autograd::grad({total / static_cast<double>(batches)}, {c.theta})[0];
}

TEST(Surrogate, SingleDrawGradientIsEquation4) {
  Case c = make_case();
  auto src = torch::tensor({{2}}), dst = torch::tensor({{0}});
  auto log_prob = pair_log_prob(c.theta, src, dst).view({1});
  auto g = loss_of(c, src, dst);
  Estimator estimator(default_settings().estimator);
  auto grad = torch::autograd::grad({estimator.objective(g, log_prob)}, {c.theta})[0];

  // Eq. 4 by hand: g · ∇log p + ∇g, with ∇log p = onehot(Y) − p off the diagonal.
  auto p = torch::softmax(c.theta.detach().masked_fill(torch::eye(kT, torch::kBool), -INFINITY).view({-1}), 0).view({kT, kT});
  auto expected = -p * g.item<double>();
  expected[2][0] += g.item<double>();
  expected[0][1] += c.theta[0][0][1].item<double>();
  EXPECT_TRUE(torch::allclose(grad[0], expected, 1e-5, 1e-6)) << grad << expected;
}

TEST(Surrogate, AverageGradientIsUnbiasedForBothRewards) {
  Case c = make_case();
  auto exact = exact_gradient(c);
  EstimatorSettings settings = default_settings().estimator;
  for (RewardScope reward : {RewardScope::batch, RewardScope::sample}) {
    settings.reward = reward;
    auto mc = monte_carlo_gradient(c, settings, 20000, 4);
    const double err = (mc - exact).abs().max().item<double>();
    EXPECT_LT(err, 0.03) << (reward == RewardScope::sample ? "per-sample" : "batch") << " reward\nmc " << mc << "\nexact " << exact;
  }
  // A moving-average baseline, built from earlier batches only, changes the variance, not the mean.
  settings.reward = RewardScope::batch;
  settings.baseline = RewardBaseline::ema;
  auto mc = monte_carlo_gradient(c, settings, 20000, 4);
  EXPECT_LT((mc - exact).abs().max().item<double>(), 0.03);
}

TEST(Surrogate, WithoutTheScoreTermTheGradientIsWrong) {
  // Negative control: dropping sg[g]·log p leaves only E[∇g], far from ∇E[g].
  Case c = make_case();
  auto mc = monte_carlo_gradient(c, default_settings().estimator, 2000, 4, /*with_score_term=*/false);
  EXPECT_GT((mc - exact_gradient(c)).abs().max().item<double>(), 0.15);
}

}  // namespace
}  // namespace htm
