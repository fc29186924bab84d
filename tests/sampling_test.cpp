// The pair sampler (Gumbel + sort + greedy scan) against the paper's one-pair-at-a-time sampler
// and the exact distribution over pair sequences; the unmerge sampler; the depth schedule.
#include <map>
#include <set>

#include <torch/torch.h>

#include "htm/policy.h"
#include "model/model.h"
#include "test_util.h"
#include "train/schedules.h"
#include "train/trainer.h"

namespace htm {
namespace {

constexpr int64_t kT = 6, kR = 3, kDraws = 100000;
constexpr int64_t kPairs = kT * kT;

// Exact probability of every sequence of kR ordered pairs under the sequential sampler.
std::vector<double> exact_sequence_probs(const torch::Tensor& logits /* T×T */) {
  auto l = logits.accessor<float, 2>();
  std::vector<double> probs(kPairs * kPairs * kPairs, 0.0);
  std::function<void(int, std::vector<char>&, int64_t, double)> walk = [&](int depth, std::vector<char>& used,
                                                                           int64_t code, double p) {
    if (depth == kR) {
      probs[code] += p;
      return;
    }
    double z = 0;
    for (int i = 0; i < kT; ++i)
      for (int j = 0; j < kT; ++j)
        if (i != j && !used[i] && !used[j]) z += std::exp(l[i][j]);
    for (int i = 0; i < kT; ++i)
      for (int j = 0; j < kT; ++j) {
        if (i == j || used[i] || used[j]) continue;
        used[i] = used[j] = 1;
        walk(depth + 1, used, code * kPairs + i * kT + j, p * std::exp(l[i][j]) / z);
        used[i] = used[j] = 0;
      }
  };
  std::vector<char> used(kT, 0);
  walk(0, used, 0, 1.0);
  return probs;
}

std::vector<double> sequence_counts(const torch::Tensor& src, const torch::Tensor& dst) {
  auto code = torch::zeros({src.size(0)}, torch::kLong);
  for (int64_t k = 0; k < kR; ++k) code = code * kPairs + src.select(1, k) * kT + dst.select(1, k);
  auto counts = torch::bincount(code, {}, kPairs * kPairs * kPairs).to(torch::kDouble);
  return std::vector<double>(counts.data_ptr<double>(), counts.data_ptr<double>() + counts.numel());
}

double total_variation(const std::vector<double>& a, const std::vector<double>& b, double n) {
  double tv = 0;
  for (size_t k = 0; k < a.size(); ++k) tv += std::abs(a[k] - b[k]);
  return 0.5 * tv / n;
}

torch::Tensor test_logits() {
  torch::manual_seed(3);
  return torch::randn({kT, kT}) * 1.5;
}

TEST(PairSampler, MatchesSequentialSamplerAndExactDistribution) {
  auto logits = test_logits();
  auto batch = logits.unsqueeze(0).expand({kDraws, kT, kT}).contiguous();
  auto fast = sample_disjoint_pairs(batch, kR, at::make_generator<at::CPUGeneratorImpl>(11));
  auto slow = sample_disjoint_pairs_sequential(batch, kR, at::make_generator<at::CPUGeneratorImpl>(12));
  auto fast_counts = sequence_counts(fast.first, fast.second);
  auto slow_counts = sequence_counts(slow.first, slow.second);
  auto exact = exact_sequence_probs(logits);

  // Sampling noise of the TV distance between two independent 100k-draw histograms of `exact`:
  // E|X| for X ~ N(0, 2p(1-p)/n) per cell.
  double noise = 0;
  for (double p : exact) noise += std::sqrt(2.0 / M_PI) * std::sqrt(2.0 * p * (1 - p) / kDraws);
  noise *= 0.5;
  const double tv = total_variation(fast_counts, slow_counts, kDraws);
  std::printf("      TV(gumbel, sequential) = %.4f, expected from sampling noise alone %.4f\n", tv, noise);
  EXPECT_LT(tv, 1.25 * noise);

  for (const auto* counts : {&fast_counts, &slow_counts}) {
    auto [stat, df] = htm::testing::chi_square(*counts, exact, kDraws);
    std::printf("      chi-square vs exact = %.1f on %d df (bound %.1f)\n", stat, df,
                htm::testing::chi_square_bound(df));
    EXPECT_LT(stat, htm::testing::chi_square_bound(df));
  }
}

TEST(PairSampler, TestDetectsAWrongDistribution) {
  // Negative control: logits 10% sharper must be rejected by the same chi-square check.
  auto logits = test_logits();
  auto batch = (logits * 1.1).unsqueeze(0).expand({kDraws, kT, kT}).contiguous();
  auto fast = sample_disjoint_pairs(batch, kR, at::make_generator<at::CPUGeneratorImpl>(11));
  auto [stat, df] =
      htm::testing::chi_square(sequence_counts(fast.first, fast.second), exact_sequence_probs(logits), kDraws);
  EXPECT_GT(stat, htm::testing::chi_square_bound(df));
}

TEST(PairSampler, ALogitBoundIsWhatTheSamplerLogProbAndEntropyRead) {
  // Logits of sd 6 read as 1.5·tanh(l / 1.5) (estimator.logit_bound): the draws follow the
  // bounded distribution and not the raw one, and the log-probability and entropy are the
  // bounded logits' own.
  const double c = 1.5;
  auto logits = test_logits() * 4;
  auto squashed = c * torch::tanh(logits / c);
  auto batch = logits.unsqueeze(0).expand({kDraws, kT, kT}).contiguous();
  std::pair<torch::Tensor, torch::Tensor> drawn;
  torch::Tensor bounded_log_prob, bounded_entropy;
  drawn = sample_disjoint_pairs(batch, kR, at::make_generator<at::CPUGeneratorImpl>(11), c);
  bounded_log_prob = pair_log_prob(batch.narrow(0, 0, 64), drawn.first.narrow(0, 0, 64), drawn.second.narrow(0, 0, 64),
                                   LogProbForm::exact, c);
  bounded_entropy = pair_entropy(batch.narrow(0, 0, 1), c);
  EXPECT_TRUE(torch::equal(bound_logits(logits, c), squashed));
  EXPECT_TRUE(torch::equal(bound_logits(logits, 0), logits));
  const auto counts = sequence_counts(drawn.first, drawn.second);
  auto [stat, df] = htm::testing::chi_square(counts, exact_sequence_probs(squashed), kDraws);
  EXPECT_LT(stat, htm::testing::chi_square_bound(df));
  auto [raw_stat, raw_df] = htm::testing::chi_square(counts, exact_sequence_probs(logits), kDraws);
  EXPECT_GT(raw_stat, htm::testing::chi_square_bound(raw_df));
  auto squashed_batch = squashed.unsqueeze(0).expand({64, kT, kT});
  EXPECT_TRUE(torch::allclose(bounded_log_prob, pair_log_prob(squashed_batch, drawn.first.narrow(0, 0, 64),
                                                              drawn.second.narrow(0, 0, 64), LogProbForm::exact)));
  EXPECT_TRUE(torch::allclose(bounded_entropy, pair_entropy(squashed.unsqueeze(0))));
  EXPECT_FALSE(torch::allclose(bounded_entropy, pair_entropy(logits.unsqueeze(0))));

  // Near the bound the score function's gradient fades. Pair (0, 1) has logit 20 and the draw
  // takes (2, 3) first: unbounded, that rare draw pulls the big logit down with a gradient of
  // about −1 (what grows when a policy nears determinism); under a bound of 2, by ~1e-8.
  auto big = torch::zeros({1, 4, 4}).index_put_({0, 0, 1}, 20.0).requires_grad_(true);
  auto src = torch::tensor({{2, 0}}, torch::kLong), dst = torch::tensor({{3, 1}}, torch::kLong);
  pair_log_prob(big, src, dst, LogProbForm::exact).sum().backward();
  const double raw_grad = big.grad().abs().max().item<double>();
  big.mutable_grad() = torch::Tensor();
  pair_log_prob(big, src, dst, LogProbForm::exact, 2.0).sum().backward();
  EXPECT_GT(raw_grad, 0.5);
  EXPECT_LT(big.grad()[0][0][1].abs().item<double>(), 1e-6);
}

TEST(PairSampler, PairsAreDisjointOrderedAndNeverSelf) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  for (auto [T, r] : std::vector<std::pair<int64_t, int64_t>>{{256, 128}, {49, 24}, {7, 1}, {2, 1}}) {
    auto logits = torch::randn({4, T, T});
    auto [src, dst] = sample_disjoint_pairs(logits, r, gen);
    ASSERT_EQ(src.sizes(), (std::vector<int64_t>{4, r}));
    for (int64_t b = 0; b < 4; ++b) {
      std::set<int64_t> seen;
      for (int64_t k = 0; k < r; ++k) {
        const int64_t i = src[b][k].item<int64_t>(), j = dst[b][k].item<int64_t>();
        ASSERT_NE(i, j);
        ASSERT_TRUE(i >= 0 && i < T && j >= 0 && j < T);
        ASSERT_TRUE(seen.insert(i).second && seen.insert(j).second) << "token used twice";
      }
    }
  }
}

// Logits spanning more than float's exp range: after the best pair is drawn, the others' rates
// relative to it underflow to 0. The sampler must still follow their softmax, not draw uniformly
// (it did before 2026-11-25: 1 draw in 3 was right here).
TEST(PairSampler, LogitsSpanningHundredsStillFollowTheirSoftmax) {
  const int64_t B = 200, T = 6;
  auto logits = torch::full({B, T, T}, -1000.0);
  logits.select(1, 0).select(1, 1).fill_(0.0);     // (0, 1)
  logits.select(1, 2).select(1, 3).fill_(-150.0);  // (2, 3): 150 below the best
  logits.select(1, 4).select(1, 5).fill_(-300.0);  // (4, 5)
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (auto sampler : {&sample_disjoint_pairs, &sample_disjoint_pairs_sequential}) {
    auto [src, dst] = sampler(logits, 3, gen, 0.0);
    const auto want_src = torch::tensor({0, 2, 4}, torch::kLong).expand({B, 3});
    const auto want_dst = torch::tensor({1, 3, 5}, torch::kLong).expand({B, 3});
    EXPECT_TRUE(torch::equal(src, want_src) && torch::equal(dst, want_dst))
        << (src.eq(want_src).logical_and(dst.eq(want_dst)).all(1).sum().item<int64_t>()) << " of " << B
        << " rows right";
  }
}

TEST(PairSampler, SameSeedSameDrawsAndRejectsImpossibleR) {
  auto logits = torch::randn({3, 16, 16});
  auto a = sample_disjoint_pairs(logits, 8, at::make_generator<at::CPUGeneratorImpl>(9));
  auto b = sample_disjoint_pairs(logits, 8, at::make_generator<at::CPUGeneratorImpl>(9));
  EXPECT_TRUE(torch::equal(a.first, b.first) && torch::equal(a.second, b.second));
  EXPECT_THROW(sample_disjoint_pairs(logits, 9, at::make_generator<at::CPUGeneratorImpl>(9)), Error);
}

TEST(PairSampler, PaperLogProbIsTheMaskedLogSoftmax) {
  auto logits = torch::randn({2, 4, 4});
  auto src = torch::tensor({{0, 2}, {3, 1}}, torch::kLong);
  auto dst = torch::tensor({{1, 3}, {0, 2}}, torch::kLong);
  auto lp = pair_log_prob(logits, src, dst, LogProbForm::paper);
  for (int64_t b = 0; b < 2; ++b) {
    double z = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        if (i != j) z += std::exp(logits[b][i][j].item<double>());
    for (int64_t k = 0; k < 2; ++k) {
      const double expect =
          logits[b][src[b][k].item<int64_t>()][dst[b][k].item<int64_t>()].item<double>() - std::log(z);
      EXPECT_NEAR(lp[b][k].item<double>(), expect, 1e-5);
    }
  }
}

TEST(TokenSampler, WithoutReplacementMatchesSequentialDraws) {
  // First draw ∝ exp(s); second ∝ exp(s) over the rest: check the joint over ordered pairs.
  const int64_t T = 4, n = 100000;
  auto scores = torch::tensor({0.5f, -1.0f, 1.2f, 0.0f});
  auto idx = sample_without_replacement(scores.unsqueeze(0).expand({n, T}).contiguous(), 2,
                                        at::make_generator<at::CPUGeneratorImpl>(4));
  auto code = idx.select(1, 0) * T + idx.select(1, 1);
  auto counts_t = torch::bincount(code, {}, T * T).to(torch::kDouble);
  std::vector<double> counts(counts_t.data_ptr<double>(), counts_t.data_ptr<double>() + T * T), probs(T * T, 0);
  auto e = scores.exp();
  const double z = e.sum().item<double>();
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j)
      if (i != j) probs[i * T + j] = e[i].item<double>() / z * e[j].item<double>() / (z - e[i].item<double>());
  auto [stat, df] = htm::testing::chi_square(counts, probs, n);
  EXPECT_LT(stat, htm::testing::chi_square_bound(df));
  EXPECT_EQ(df, 11);
}

TEST(Schedule, DepthDistributionIsGeometric) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  for (double rho : {0.5, 0.9, 1.0}) {
    const int64_t L = 8, n = 100000;
    std::vector<double> counts(L, 0), probs(L);
    for (int64_t k = 0; k < n; ++k) counts[sample_depth(rho, L, gen) - 1] += 1;
    double z = 0;
    for (int d = 1; d <= L; ++d) z += std::pow(rho, d);
    for (int d = 1; d <= L; ++d) probs[d - 1] = std::pow(rho, d) / z;
    auto [stat, df] = htm::testing::chi_square(counts, probs, n);
    EXPECT_LT(stat, htm::testing::chi_square_bound(df)) << "rho " << rho;
  }
  EXPECT_DOUBLE_EQ(rho_at(0.05, 0.01, 10), 0.15);
  EXPECT_DOUBLE_EQ(rho_at(0.05, 0.5, 10), 1.0);
}

TEST(Schedule, MergeFractionsReproduceTable1Bottlenecks) {
  // Paper Table 1: 256 tokens, 8 layers; 0/25/50/100 % merged per layer -> 256/91/27/1 tokens.
  const std::map<double, int64_t> expected = {{0.0, 256}, {0.25, 91}, {0.5, 27}, {1.0, 1}};
  for (auto [fraction, bottleneck] : expected) {
    auto s = make_schedule(256, fraction, 8);
    EXPECT_EQ(tokens_after(256, s, s.size()), bottleneck) << fraction;
    EXPECT_NO_THROW(check_schedule(256, s));
  }
  EXPECT_EQ(make_schedule(256, 1.0, 8), (std::vector<int64_t>{128, 64, 32, 16, 8, 4, 2, 1}));
  EXPECT_THROW(check_schedule(8, {4, 3}), Error);
}

}  // namespace
}  // namespace htm
