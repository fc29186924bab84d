// How the estimator credits draws beyond one reward per sample (issue 12, docs/policy.md): a
// learned value per layer (estimator.baseline = "value"), a dense per-merge reward
// (estimator.dense) and replayed draws weighted by importance (estimator.replay), each on the
// enumerable two-pair case.
#include <torch/torch.h>

#include "config/settings.h"
#include "htm/policy.h"
#include "test_util.h"
#include "train/estimator/estimator.h"
#include "two_pair_case.h"

namespace htm {
namespace {

using htm::testing::draw_loss;
using htm::testing::finite_difference_gradient;
using htm::testing::two_pair_case;
using htm::testing::TwoPairCase;

// The value baseline with the two pairs of a draw as two layers' decisions: layer 1's value is
// one number, layer 2's a table over the first pair drawn (the state the second draw is made
// from), indexed by src·4 + dst.
std::vector<ValuedDecision> two_layers(const torch::Tensor& log_prob, const torch::Tensor& src,
                                       const torch::Tensor& dst, const torch::Tensor& v1, const torch::Tensor& v2) {
  auto first = src.select(1, 0) * 4 + dst.select(1, 0);
  return {{log_prob.select(1, 0), v1.expand({src.size(0)})}, {log_prob.select(1, 1), v2.index_select(0, first)}};
}

// E[g] and, for each first pair (src·4 + dst), E[g | first pair] (0 where it cannot come first).
std::pair<double, torch::Tensor> true_values(const TwoPairCase& c, double shift = 0) {
  auto p = pair_log_prob(c.theta.detach().expand({c.src.size(0), 4, 4}), c.src, c.dst, LogProbForm::exact).sum(1).exp();
  auto g = draw_loss(c, c.src, c.dst) + shift;
  auto first = c.src.select(1, 0) * 4 + c.dst.select(1, 0);
  auto pg = torch::zeros({16}, torch::kDouble).index_add_(0, first, p * g);
  auto pf = torch::zeros({16}, torch::kDouble).index_add_(0, first, p);
  return {(p * g).sum().item<double>(), pg / pf.clamp_min(1e-300)};
}

EstimatorSettings value_settings() {
  EstimatorSettings settings = default_settings().estimator;
  settings.baseline = RewardBaseline::value;
  return settings;
}

TEST(ValueBaseline, AnyValuesOfTheStateLeaveTheGradientUnbiased) {
  TwoPairCase c = two_pair_case();
  const auto fd = finite_difference_gradient(c);
  Estimator estimator(value_settings());
  const int64_t n = 200000;
  auto logits = c.theta.expand({n, 4, 4});
  auto [src, dst] =
      sample_disjoint_pairs(logits.detach().to(torch::kFloat), 2, at::make_generator<at::CPUGeneratorImpl>(9));
  auto lp = pair_log_prob(logits, src, dst, LogProbForm::exact);
  torch::manual_seed(3);  // deliberately wrong values: unbiased all the same, only noisier
  auto v1 = torch::full({1}, 3.0, torch::kDouble), v2 = 4.0 * torch::rand({16}, torch::kDouble);
  auto objective = estimator.objective(draw_loss(c, src, dst), lp.sum(1), {}, {}, two_layers(lp, src, dst, v1, v2));
  auto grad = torch::autograd::grad({objective}, {c.theta})[0][0];
  EXPECT_LT((grad - fd).abs().max().item<double>(), 0.08 * fd.abs().max().item<double>()) << grad << "\nfd\n" << fd;
}

TEST(ValueBaseline, PerLayerValuesLowerTheVarianceBelowOneBaseline) {
  // A loss with a large constant part. One baseline for the whole draw (its expected loss) removes
  // the constant; the second layer's value of the first pair also stops charging the first
  // pair's cost to the second draw, and lowers the variance further.
  TwoPairCase c = two_pair_case();
  const double shift = 50;
  const auto [mean, conditional] = true_values(c, shift);
  auto one = torch::full({1}, mean, torch::kDouble);
  auto spread = [&](RewardBaseline baseline, const torch::Tensor& v2) {
    EstimatorSettings settings = value_settings();
    settings.baseline = baseline;
    std::vector<torch::Tensor> grads;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
    for (int rep = 0; rep < 300; ++rep) {
      Estimator estimator(settings);
      auto logits = c.theta.expand({16, 4, 4});
      auto [src, dst] = sample_disjoint_pairs(logits.detach().to(torch::kFloat), 2, gen);
      auto lp = pair_log_prob(logits, src, dst, LogProbForm::exact);
      auto objective =
          estimator.objective(draw_loss(c, src, dst) + shift, lp.sum(1), {}, {}, two_layers(lp, src, dst, one, v2));
      grads.push_back(torch::autograd::grad({objective}, {c.theta})[0].flatten());
    }
    return torch::stack(grads).var(0).sum().item<double>();
  };
  const double none = spread(RewardBaseline::none, conditional);
  const double constant = spread(RewardBaseline::value, one.expand({16}));
  const double per_layer = spread(RewardBaseline::value, conditional);
  std::printf("      gradient variance: no baseline %.3g, one value %.3g, per-layer values %.3g\n", none, constant,
              per_layer);
  EXPECT_LT(constant, 0.05 * none);
  EXPECT_LT(per_layer, 0.85 * constant);
}

TEST(ValueBaseline, ValuesRegressTheLossAndTeachThePolicyNothing) {
  // Descending the objective with the policy held fixed moves each value to the expected loss of
  // its state: E[g] for the first layer, E[g | first pair] for the second.
  TwoPairCase c = two_pair_case();
  const auto [mean, conditional] = true_values(c);
  auto v1 = torch::zeros({1}, torch::kDouble).requires_grad_(true);
  auto v2 = torch::zeros({16}, torch::kDouble).requires_grad_(true);
  torch::optim::Adam optimiser({v1, v2}, torch::optim::AdamOptions(0.05));
  Estimator estimator(value_settings());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  auto logits = c.theta.detach().expand({256, 4, 4});
  for (int step = 0; step < 600; ++step) {
    auto [src, dst] = sample_disjoint_pairs(logits.to(torch::kFloat), 2, gen);
    auto lp = pair_log_prob(logits, src, dst, LogProbForm::exact);
    optimiser.zero_grad();
    estimator.objective(draw_loss(c, src, dst), lp.sum(1), {}, {}, two_layers(lp, src, dst, v1, v2)).backward();
    optimiser.step();
  }
  EXPECT_NEAR(v1.item<double>(), mean, 0.1);
  auto p_first =
      torch::zeros({16}, torch::kDouble)
          .index_add_(0, c.src.select(1, 0) * 4 + c.dst.select(1, 0),
                      pair_log_prob(c.theta.detach().expand({c.src.size(0), 4, 4}), c.src, c.dst, LogProbForm::exact)
                          .sum(1)
                          .exp());
  for (int64_t k = 0; k < 16; ++k)
    if (p_first[k].item<double>() > 0.05)
      EXPECT_NEAR(v2[k].item<double>(), conditional[k].item<double>(), 0.15) << "first pair " << k;
  ASSERT_EQ(estimator.diagnostics().size(), 1u);
  EXPECT_EQ(estimator.diagnostics()[0].first, "policy_value_error");
  EXPECT_GT(estimator.diagnostics()[0].second.item<double>(), 0);

  // The values' regression reaches only the values: the policy's gradient is the surrogate's.
  auto theta = c.theta.detach().clone().requires_grad_(true);
  auto [src, dst] = sample_disjoint_pairs(logits.to(torch::kFloat), 2, gen);
  auto lp = pair_log_prob(theta.expand({256, 4, 4}), src, dst, LogProbForm::exact);
  auto g = draw_loss(c, src, dst);
  auto valued = two_layers(lp, src, dst, v1, v2);
  auto with = torch::autograd::grad({estimator.objective(g, lp.sum(1), {}, {}, valued)}, {theta}, {}, true)[0];
  auto by_hand =
      ((g - valued[0].value.detach()) * lp.select(1, 0) + (g - valued[1].value.detach()) * lp.select(1, 1)).mean();
  EXPECT_TRUE(torch::allclose(with, torch::autograd::grad({by_hand}, {theta})[0], 1e-9, 1e-12));
}

TEST(ValueBaseline, BadUseIsRefused) {
  EstimatorSettings settings = value_settings();
  settings.method = EstimatorMethod::prob_scale;
  EXPECT_THAT(htm::testing::error_of([&] { Estimator e(settings); }), ::testing::HasSubstr("prob_scale"));
  Estimator estimator(value_settings());
  EXPECT_THAT(htm::testing::error_of([&] { estimator.objective(torch::ones({2}), torch::zeros({2})); }),
              ::testing::HasSubstr("no values"));
}

// The dense per-merge reward (estimator.dense): with the pair costs of TwoPairCase as each merged
// pair's local error and nothing else in the loss, its surrogate's gradient is the gradient of
// the expected sum of the pairs' errors, because each pair is credited with its own error and
// the errors of the pairs drawn after it; crediting a pair with its own error alone is biased.
TEST(DenseReward, ErrorsToGoGiveTheGradientOfTheExpectedPairErrors) {
  TwoPairCase c = two_pair_case();
  const auto fd = finite_difference_gradient(c);  // E[g] with g the sum of the two pairs' costs
  EstimatorSettings settings = default_settings().estimator;
  settings.baseline = RewardBaseline::none;
  settings.dense = 1;
  Estimator estimator(settings);
  const int64_t n = 200000;
  auto logits = c.theta.expand({n, 4, 4});
  auto [src, dst] =
      sample_disjoint_pairs(logits.detach().to(torch::kFloat), 2, at::make_generator<at::CPUGeneratorImpl>(9));
  auto lp = pair_log_prob(logits, src, dst, LogProbForm::exact);
  auto error = c.cost.index_select(0, (src * 4 + dst).view(-1)).view(src.sizes());  // n×2
  auto objective = estimator.objective(torch::zeros({n}, torch::kDouble), lp.sum(1), {}, {}, {}, {{lp, error}});
  auto dense = torch::autograd::grad({objective}, {c.theta}, {}, true)[0][0];
  auto own = torch::autograd::grad({((error - error.mean(0)) * lp).sum(1).mean()}, {c.theta})[0][0];
  const double scale = fd.abs().max().item<double>();
  EXPECT_LT((dense - fd).abs().max().item<double>(), 0.08 * scale) << dense << "\nfd\n" << fd;
  EXPECT_GT((own - fd).abs().max().item<double>(), 0.25 * scale) << "own error alone\n" << own << "\nfd\n" << fd;
  ASSERT_EQ(estimator.diagnostics().size(), 1u);
  EXPECT_EQ(estimator.diagnostics()[0].first, "policy_pair_error");
  EXPECT_NEAR(estimator.diagnostics()[0].second.item<double>(), error.mean().item<double>(), 1e-12);
}

// Replay (estimator.replay): draws of another policy, weighted by p_now / p_then.
TEST(Replay, ImportanceWeightsMakeAnotherPolicysDrawsUnbiasedForToday) {
  TwoPairCase c = two_pair_case();
  const auto fd = finite_difference_gradient(c);  // of today's expected loss
  torch::manual_seed(41);
  auto then = c.theta.detach() + 0.7 * torch::randn({1, 4, 4}, torch::kDouble);  // the policy that drew
  EstimatorSettings settings = default_settings().estimator;
  settings.replay_clip = 1e9;  // untruncated
  Estimator estimator(settings);
  const int64_t n = 200000;
  auto [src, dst] =
      sample_disjoint_pairs(then.to(torch::kFloat).expand({n, 4, 4}), 2, at::make_generator<at::CPUGeneratorImpl>(3));
  auto behaviour = pair_log_prob(then.expand({n, 4, 4}), src, dst, LogProbForm::exact).sum(1);
  auto now = pair_log_prob(c.theta.expand({n, 4, 4}), src, dst, LogProbForm::exact).sum(1);
  auto g = draw_loss(c, src, dst);
  auto grad = torch::autograd::grad({estimator.replayed(g, now, now, behaviour)}, {c.theta}, {}, true)[0][0];
  const double scale = fd.abs().max().item<double>();
  EXPECT_LT((grad - fd).abs().max().item<double>(), 0.08 * scale) << grad << "\nfd\n" << fd;
  // Without the weights the same draws estimate the gradient of the other policy's objective.
  auto unweighted = torch::autograd::grad({((g - g.mean()) * now).mean()}, {c.theta})[0][0];
  EXPECT_GT((unweighted - fd).abs().max().item<double>(), 0.25 * scale);
  ASSERT_EQ(estimator.diagnostics().size(), 1u);
  EXPECT_EQ(estimator.diagnostics()[0].first, "policy_replay_weight");
  EXPECT_NEAR(estimator.diagnostics()[0].second.item<double>(), 1.0, 0.03);  // E_q[p / q] = 1
  settings.replay_clip = 0.5;                                                // truncated: no weight above the clip
  Estimator clipped(settings);
  clipped.replayed(g, now, now, behaviour);
  EXPECT_LE(clipped.diagnostics()[0].second.item<double>(), 0.5);
}

}  // namespace
}  // namespace htm
