// The score-function surrogate (paper eq. 2-4) on a case small enough to enumerate: 3 tokens,
// one pair merged, so 6 actions. Its gradient must equal eq. 4 for a fixed draw and, averaged
// over draws, the exact gradient of the expected loss.
#include <torch/torch.h>

#include "config/settings.h"
#include "htm/policy.h"
#include "test_util.h"
#include "train/estimator/estimator.h"
#include "two_pair_case.h"

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
  // The 6 actions as 6 one-pair draws of the same logits.
  auto src = torch::tensor(s).view({-1, 1}), dst = torch::tensor(d).view({-1, 1});
  auto p = pair_log_prob(c.theta.expand({6, kT, kT}), src, dst, LogProbForm::exact).exp().view(-1);
  auto expected = (p * loss_of(c, src, dst)).sum();
  return torch::autograd::grad({expected}, {c.theta})[0];
}

// Average surrogate gradient over `batches` batches of `batch` draws each.
torch::Tensor monte_carlo_gradient(const Case& c, const EstimatorSettings& settings, int64_t batches, int64_t batch,
                                   bool with_score_term = true) {
  Estimator estimator(settings);
  const int64_t n = batches * batch;
  auto logits = c.theta.expand({n, kT, kT});
  auto [src, dst] = sample_disjoint_pairs(logits, 1, at::make_generator<at::CPUGeneratorImpl>(8));
  auto log_prob = pair_log_prob(logits, src, dst, LogProbForm::exact).view({batches, batch});
  auto g = loss_of(c, src, dst).view({batches, batch});
  torch::Tensor total = torch::zeros({});
  for (int64_t k = 0; k < batches; ++k)
    total = total + estimator.objective(g[k], with_score_term ? log_prob[k] : torch::Tensor());
  return torch::autograd::grad({total / static_cast<double>(batches)}, {c.theta})[0];
}

TEST(Surrogate, SingleDrawGradientIsEquation4) {
  Case c = make_case();
  auto src = torch::tensor({{2}}), dst = torch::tensor({{0}});
  auto log_prob = pair_log_prob(c.theta, src, dst, LogProbForm::exact).view({1});
  auto g = loss_of(c, src, dst);
  Estimator estimator(default_settings().estimator);
  auto grad = torch::autograd::grad({estimator.objective(g, log_prob)}, {c.theta})[0];

  // Eq. 4 by hand: g · ∇log p + ∇g, with ∇log p = onehot(Y) − p off the diagonal.
  auto p = torch::softmax(c.theta.detach().masked_fill(torch::eye(kT, torch::kBool), -INFINITY).view({-1}), 0)
               .view({kT, kT});
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
    EXPECT_LT(err, 0.03) << (reward == RewardScope::sample ? "per-sample" : "batch") << " reward\nmc " << mc
                         << "\nexact " << exact;
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

// ---------------------------------------------------------------------------------------------
// The exact sequential log-probability (estimator.log_prob = "exact", issue 12) against the
// paper's unconstrained one, on draws of several pairs where the two differ.
namespace htm {
namespace {

using htm::testing::draw_loss;
using htm::testing::expected_loss;
using htm::testing::finite_difference_gradient;
using htm::testing::two_pair_case;
using htm::testing::TwoPairCase;

// ‖mean over draws of ∇ Σ_k log p_k‖ / mean over draws of ‖∇ Σ_k log p_k‖ for T = 16, r = 8 and
// logits of standard deviation 2: the score function's mean, which is 0 for a true
// log-probability, relative to its size. Monte-Carlo floor ≈ 1/√draws.
double relative_mean_score(LogProbForm form, int64_t draws) {
  torch::manual_seed(4);
  const int64_t T = 16, r = 8;
  auto base = 2.0 * torch::randn({1, T, T});
  auto logits = base.expand({draws, T, T}).clone().requires_grad_(true);
  auto [src, dst] = sample_disjoint_pairs(logits, r, at::make_generator<at::CPUGeneratorImpl>(17));
  auto grad = torch::autograd::grad({pair_log_prob(logits, src, dst, form).sum()}, {logits})[0];
  return grad.mean(0).norm().item<double>() / grad.flatten(1).norm(2, 1).mean().item<double>();
}

TEST(ExactLogProb, ScoreHasMeanZeroAndThePapersDoesNot) {
  const int64_t draws = 4000;  // floor ≈ 1.6 %
  const double exact = relative_mean_score(LogProbForm::exact, draws);
  const double paper = relative_mean_score(LogProbForm::paper, draws);
  std::printf("      |E[score]| / E|score|, T = 16, r = 8, sd-2 logits, %lld draws: exact %.3f, paper %.3f\n",
              static_cast<long long>(draws), exact, paper);
  EXPECT_LT(exact, 0.035) << "the exact form's score has a mean: it is not the draw's log-probability";
  EXPECT_GT(paper, 0.10) << "the paper's form should be measurably biased at sd-2 logits";
}

TEST(ExactLogProb, PairsAreRenormalisedOverTheTokensStillUnused) {
  auto logits = torch::randn({2, 5, 5});
  auto src = torch::tensor({{0, 2}, {3, 1}}, torch::kLong);
  auto dst = torch::tensor({{1, 3}, {0, 4}}, torch::kLong);
  auto lp = pair_log_prob(logits, src, dst, LogProbForm::exact);
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<bool> used(5, false);
    for (int64_t k = 0; k < 2; ++k) {
      double z = 0;
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 5; ++j)
          if (i != j && !used[i] && !used[j]) z += std::exp(logits[b][i][j].item<double>());
      const int64_t i = src[b][k].item<int64_t>(), j = dst[b][k].item<int64_t>();
      EXPECT_NEAR(lp[b][k].item<double>(), logits[b][i][j].item<double>() - std::log(z), 1e-5);
      used[i] = used[j] = true;
    }
  }
  // Far-apart logits keep their precision (the later normalisers are tiny next to the first).
  auto wide = torch::tensor({0.0, 80.0, -60.0, 5.0, 40.0, 0.0, 1.0, 2.0, -70.0, 3.0, 0.0, 4.0, 9.0, 8.0, 7.0, 0.0})
                  .view({1, 4, 4});
  auto lp2 = pair_log_prob(wide, torch::tensor({{0}, {2}}).view({1, 2}), torch::tensor({{1}, {3}}).view({1, 2}),
                           LogProbForm::exact);
  // Second draw 2→3 among the pairs of tokens {2, 3}: logits 4 (2→3) and 7 (3→2).
  EXPECT_NEAR(lp2[0][1].item<double>(), 4.0 - std::log(std::exp(4.0) + std::exp(7.0)), 1e-4);
}

TEST(ExactLogProb, TokensArePlackettLuceAndAForcedChoiceHasNone) {
  auto scores = torch::randn({2, 6});
  auto index = torch::tensor({{4, 0, 5}, {1, 2, 3}}, torch::kLong);
  auto lp = token_log_prob(scores, index, LogProbForm::exact);
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<bool> used(6, false);
    for (int64_t k = 0; k < 3; ++k) {
      double z = 0;
      for (int t = 0; t < 6; ++t)
        if (!used[t]) z += std::exp(scores[b][t].item<double>());
      const int64_t t = index[b][k].item<int64_t>();
      EXPECT_NEAR(lp[b][k].item<double>(), scores[b][t].item<double>() - std::log(z), 1e-5);
      used[t] = true;
    }
  }
  // All 6 of 6 unmerged: one outcome, nothing decided, no log-probability (the paper's has one).
  auto all = torch::arange(6).view({1, 6});
  EXPECT_FALSE(token_log_prob(scores.narrow(0, 0, 1), all, LogProbForm::exact).defined());
  EXPECT_TRUE(token_log_prob(scores.narrow(0, 0, 1), all, LogProbForm::paper).defined());

  // Unbiased as a score: draws of 3 of 8 tokens from sd-2 scores.
  torch::manual_seed(6);
  const int64_t draws = 4000;
  for (LogProbForm form : {LogProbForm::exact, LogProbForm::paper}) {
    auto s = (2.0 * torch::randn({1, 8})).expand({draws, 8}).clone().requires_grad_(true);
    auto drawn = sample_without_replacement(s, 3, at::make_generator<at::CPUGeneratorImpl>(3));
    auto grad = torch::autograd::grad({token_log_prob(s, drawn, form).sum()}, {s})[0];
    const double relative = grad.mean(0).norm().item<double>() / grad.norm(2, 1).mean().item<double>();
    if (form == LogProbForm::exact)
      EXPECT_LT(relative, 0.035);
    else
      EXPECT_GT(relative, 0.10);
  }
}

TEST(ExactLogProb, EnumeratedDrawsAreTheSamplersDistribution) {
  TwoPairCase c = two_pair_case();
  auto logits = c.theta.detach().expand({c.src.size(0), 4, 4});
  auto p = pair_log_prob(logits, c.src, c.dst, LogProbForm::exact).sum(1).exp();
  EXPECT_NEAR(p.sum().item<double>(), 1.0, 1e-9);
  const int64_t n = 40000;
  auto [src, dst] = sample_disjoint_pairs(c.theta.detach().to(torch::kFloat).expand({n, 4, 4}), 2,
                                          at::make_generator<at::CPUGeneratorImpl>(5));
  auto key = [](const torch::Tensor& s, const torch::Tensor& d) {
    return ((s.select(1, 0) * 4 + d.select(1, 0)) * 16 + s.select(1, 1) * 4 + d.select(1, 1));
  };
  auto counts = torch::bincount(key(src, dst), {}, 256).to(torch::kDouble);
  std::vector<double> observed, probs;
  auto keys = key(c.src, c.dst);
  for (int64_t k = 0; k < c.src.size(0); ++k) {
    observed.push_back(counts[keys[k].item<int64_t>()].item<double>());
    probs.push_back(p[k].item<double>());
  }
  auto [stat, dof] = htm::testing::chi_square(observed, probs, static_cast<double>(n));
  EXPECT_LT(stat, dof + 5 * std::sqrt(2.0 * dof)) << "chi-square " << stat << " on " << dof << " dof";
}

TEST(ExactLogProb, SurrogateGradientMatchesFiniteDifferencesOfTheExpectedLoss) {
  TwoPairCase c = two_pair_case();
  const auto fd = finite_difference_gradient(c);
  // The surrogate's gradient averaged over sampled draws, for each log-probability form.
  auto surrogate_gradient = [&](LogProbForm form, RewardBaseline baseline, int64_t rollouts) {
    EstimatorSettings settings = default_settings().estimator;
    settings.baseline = baseline;
    settings.rollouts = rollouts;
    Estimator estimator(settings);
    const int64_t n = 200000;
    auto logits = c.theta.expand({n, 4, 4});
    auto [src, dst] =
        sample_disjoint_pairs(logits.detach().to(torch::kFloat), 2, at::make_generator<at::CPUGeneratorImpl>(9));
    auto objective = estimator.objective(draw_loss(c, src, dst), pair_log_prob(logits, src, dst, form).sum(1));
    return torch::autograd::grad({objective}, {c.theta})[0][0];
  };
  auto exact = surrogate_gradient(LogProbForm::exact, RewardBaseline::none, 1);
  auto paper = surrogate_gradient(LogProbForm::paper, RewardBaseline::none, 1);
  auto rloo = surrogate_gradient(LogProbForm::exact, RewardBaseline::rloo, 4);
  const double scale = fd.abs().max().item<double>();
  EXPECT_LT((exact - fd).abs().max().item<double>(), 0.08 * scale) << "exact\n" << exact << "\nfd\n" << fd;
  EXPECT_LT((rloo - fd).abs().max().item<double>(), 0.08 * scale) << "rloo\n" << rloo << "\nfd\n" << fd;
  std::printf("      max |surrogate − finite differences| / max |fd|: exact %.3f, rloo %.3f, paper %.3f\n",
              (exact - fd).abs().max().item<double>() / scale, (rloo - fd).abs().max().item<double>() / scale,
              (paper - fd).abs().max().item<double>() / scale);
  EXPECT_GT((paper - fd).abs().max().item<double>(), 0.25 * scale) << "paper\n" << paper << "\nfd\n" << fd;
}

TEST(Estimator, LeaveOneOutBaselineLowersTheVarianceWithoutBias) {
  // A loss with a large constant part: the score term's variance is mostly that constant,
  // which RLOO removes and no baseline does not.
  TwoPairCase c = two_pair_case();
  auto spread = [&](RewardBaseline baseline) {
    EstimatorSettings settings = default_settings().estimator;
    settings.baseline = baseline;
    settings.rollouts = 4;
    std::vector<torch::Tensor> grads;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
    for (int rep = 0; rep < 200; ++rep) {
      Estimator estimator(settings);
      auto logits = c.theta.expand({16, 4, 4});  // 4 inputs × 4 rollouts
      auto [src, dst] = sample_disjoint_pairs(logits.detach().to(torch::kFloat), 2, gen);
      auto objective = estimator.objective(draw_loss(c, src, dst) + 50.0,
                                           pair_log_prob(logits, src, dst, LogProbForm::exact).sum(1));
      grads.push_back(torch::autograd::grad({objective}, {c.theta})[0].flatten());
    }
    return torch::stack(grads).var(0).sum().item<double>();
  };
  EXPECT_LT(spread(RewardBaseline::rloo), 0.05 * spread(RewardBaseline::none));
  EstimatorSettings bad = default_settings().estimator;
  bad.baseline = RewardBaseline::rloo;
  EXPECT_THAT(htm::testing::error_of([&] { Estimator e(bad); }), ::testing::HasSubstr("rollouts"));
}

TEST(Estimator, EntropyBonusPushesTowardsUniformMerges) {
  auto logits =
      torch::tensor({{3.0, 0.0, 1.0}, {0.5, 2.0, -1.0}, {0.0, 0.0, 7.0}}).view({1, 3, 3}).requires_grad_(true);
  // The entropy over the 6 off-diagonal pairs, by hand.
  std::vector<double> off = {0.0, 1.0, 0.5, -1.0, 0.0, 0.0};
  double z = 0, h = 0;
  for (double v : off) z += std::exp(v);
  for (double v : off) h -= std::exp(v) / z * (v - std::log(z));
  auto entropy = pair_entropy(logits);
  EXPECT_NEAR(entropy.item<double>(), h, 1e-5);
  EstimatorSettings settings = default_settings().estimator;
  settings.entropy = 0.5;
  Estimator estimator(settings);
  auto objective = estimator.objective(
      torch::zeros({1}),
      pair_log_prob(logits, torch::tensor({{0}}), torch::tensor({{2}}), LogProbForm::exact).sum(1) * 0, entropy);
  auto grad = torch::autograd::grad({objective}, {logits})[0];
  // Descending the objective raises the entropy: the largest off-diagonal logit (0→2) goes down.
  EXPECT_GT(grad[0][0][2].item<double>(), 0);
  EXPECT_NEAR(objective.item<double>(), -0.5 * h, 1e-5);
}

}  // namespace
}  // namespace htm
