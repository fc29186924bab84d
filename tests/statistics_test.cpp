// The statistics behind `htm compare` and `htm report`, against values computed independently:
// scipy 1.10.1 (Debian's python3-scipy) for the t-tests and bounds (values through a t quantile
// agree to 1e-9: Boost's and scipy's quantile algorithms differ in the last digits), a hand-worked textbook table
// for Holm, and Student's t density integrated numerically for the p-values.
#include <cmath>

#include "htm/error.h"
#include "stats/statistics.h"
#include "test_util.h"

namespace htm::stats {
namespace {

// Two studies' final scores over five seeds (the same seeds on both sides).
const std::vector<double> kA = {0.881, 0.899, 0.932, 0.905, 0.870};
const std::vector<double> kB = {0.757, 0.771, 0.745, 0.790, 0.760};

// Two-sided tail 2·∫_{|t|}^{∞} of Student's t density with df degrees of freedom (Simpson's rule).
double two_sided_tail(double t, double df) {
  const double c = std::exp(std::lgamma((df + 1) / 2) - std::lgamma(df / 2)) / std::sqrt(df * M_PI);
  auto pdf = [&](double x) { return c * std::pow(1 + x * x / df, -(df + 1) / 2); };
  const double a = std::abs(t), b = a + 2000;
  const int n = 2000000;
  const double h = (b - a) / n;
  double s = pdf(a) + pdf(b);
  for (int i = 1; i < n; ++i) s += pdf(a + i * h) * (i % 2 ? 4 : 2);
  return 2 * s * h / 3;
}

TEST(StatisticsTest, PairedTestMatchesScipyTtestRel) {
  // scipy.stats.ttest_rel(kA, kB): statistic 9.540879863093872, pvalue 0.0006739723560863108,
  // df 4, confidence_interval(0.95) (0.09415451706120703, 0.17144548293879297).
  const TTest r = paired_test(kA, kB);
  EXPECT_EQ(r.kind, TestKind::paired);
  EXPECT_NEAR(r.t, 9.540879863093872, 1e-9);
  EXPECT_NEAR(r.p, 0.0006739723560863108, 1e-12);
  EXPECT_DOUBLE_EQ(r.df, 4);
  EXPECT_NEAR(r.ci_low, 0.09415451706120703, 1e-9);
  EXPECT_NEAR(r.ci_high, 0.17144548293879297, 1e-9);
  EXPECT_NEAR(r.diff, 0.1328, 1e-12);
}

TEST(StatisticsTest, WelchTestMatchesScipyTtestInd) {
  // scipy.stats.ttest_ind(kA, kB, equal_var=False): statistic 10.145980941002927, pvalue
  // 1.576438880957173e-05; Welch-Satterthwaite df 7.217752697459186 and the interval
  // diff ± t.ppf(0.975, df)·se = (0.10203789119368309, 0.16356210880631675).
  const TTest r = welch_test(kA, kB);
  EXPECT_EQ(r.kind, TestKind::welch);
  EXPECT_NEAR(r.t, 10.145980941002927, 1e-9);
  EXPECT_NEAR(r.p, 1.576438880957173e-05, 1e-12);
  EXPECT_NEAR(r.df, 7.217752697459186, 1e-9);
  EXPECT_NEAR(r.ci_low, 0.10203789119368309, 1e-9);
  EXPECT_NEAR(r.ci_high, 0.16356210880631675, 1e-9);
  // Uneven sizes: ttest_ind([.21, .215, .209, .22], [.17, .18, .165, .175, .172, .169],
  // equal_var=False): statistic 12.614041895964869, pvalue 6.4621738594841715e-06.
  const TTest u = welch_test({0.21, 0.215, 0.209, 0.22}, {0.17, 0.18, 0.165, 0.175, 0.172, 0.169});
  EXPECT_NEAR(u.t, 12.614041895964869, 1e-9);
  EXPECT_NEAR(u.p, 6.4621738594841715e-06, 1e-13);
}

TEST(StatisticsTest, PairingTheSameValuesGivesAnotherAnswer) {
  // The seeds share most of their variation here, so pairing removes it: the paired p is the
  // smaller one whenever the covariance is positive. Both agree with the t density by hand.
  const std::vector<double> a = {0.30, 0.50, 0.20, 0.40, 0.60}, b = {0.28, 0.47, 0.19, 0.37, 0.58};
  const TTest paired = paired_test(a, b), welch = welch_test(a, b);
  EXPECT_LT(paired.p, 0.01);
  EXPECT_GT(welch.p, 0.5);
  EXPECT_NEAR(paired.p, two_sided_tail(paired.t, paired.df), 1e-6);
  EXPECT_NEAR(welch.p, two_sided_tail(welch.t, welch.df), 1e-6);
}

TEST(StatisticsTest, UndefinedForTooFewValuesOrNoSpread) {
  EXPECT_TRUE(std::isnan(welch_test({1.0}, {2.0, 3.0}).p));
  EXPECT_TRUE(std::isnan(welch_test({1.0, 1.0}, {1.0, 1.0}).p));
  EXPECT_TRUE(std::isnan(paired_test({1.0, 2.0}, {0.0, 1.0}).p));  // every difference the same
  EXPECT_THROW(paired_test({1.0, 2.0}, {1.0}), Error);
}

TEST(StatisticsTest, PercentEffectIsTheDeltaMethodIntervalOfTheRatio) {
  // numpy by hand: R = mean(kA)/mean(kB); se_R = sqrt(var_a/n + R² var_b/n − 2R cov/n)/mean(kB)
  // (cov only when paired); interval 100·(R ± t.ppf(0.975, df)·se_R − 1).
  const TTest welch = welch_test(kA, kB);
  const Effect w = percent_effect(kA, kB, welch);
  EXPECT_NEAR(w.percent, 17.368558723515548, 1e-9);
  EXPECT_NEAR(w.ci_low, 13.098130528047736, 1e-9);
  EXPECT_NEAR(w.ci_high, 21.63898691898336, 1e-9);
  const Effect p = percent_effect(kA, kB, paired_test(kA, kB));
  EXPECT_NEAR(p.percent, 17.368558723515548, 1e-9);
  EXPECT_NEAR(p.ci_low, 11.990801413484832, 1e-9);
  EXPECT_NEAR(p.ci_high, 22.746316033546265, 1e-9);
}

TEST(StatisticsTest, TargetBoundsMatchScipy) {
  // kA against cluster_f1 >= 0.9: mean − t.ppf(0.95, 4)·sd/√5 = 0.8746520859901653 and
  // ttest_1samp(kA, 0.9, alternative='greater').pvalue = 0.5902603837078899: the mean (0.8974)
  // is near the threshold but the bound is well below it.
  const Target f1 = parse_target("cluster_f1>=0.9");
  EXPECT_EQ(f1.metric, "cluster_f1");
  EXPECT_TRUE(f1.at_least);
  EXPECT_DOUBLE_EQ(f1.threshold, 0.9);
  const TargetCheck c = check_target(kA, f1);
  EXPECT_NEAR(c.bound, 0.8746520859901653, 1e-9);
  EXPECT_NEAR(c.p, 0.5902603837078899, 1e-12);
  EXPECT_FALSE(c.met);
  // An upper bound for "at most": mean + t.ppf(0.95, 4)·se = 0.17754923107962814, and
  // ttest_1samp(x, 0.2, alternative='less').pvalue = 0.00019320773673725633.
  const Target mse = parse_target("test/mse<=0.2");
  EXPECT_EQ(mse.metric, "test/mse");
  EXPECT_FALSE(mse.at_least);
  const TargetCheck m = check_target({0.1723, 0.1801, 0.1652, 0.1688, 0.1744}, mse);
  EXPECT_NEAR(m.bound, 0.17754923107962814, 1e-9);
  EXPECT_NEAR(m.p, 0.00019320773673725633, 1e-13);
  EXPECT_TRUE(m.met);
  // No spread: the bound is the value itself.
  EXPECT_TRUE(check_target({1.0, 1.0, 1.0}, f1).met);
  EXPECT_FALSE(check_target({0.8, 0.8}, f1).met);
  EXPECT_TRUE(std::isnan(check_target({0.95}, f1).bound));
}

TEST(StatisticsTest, TargetsThatCannotBeReadAreRefused) {
  for (const char* bad : {"cluster_f1", ">=0.9", "cluster_f1>=", "cluster_f1>=high", "f1>=0.9x", "f1<=nan"})
    EXPECT_THROW(parse_target(bad), Error) << bad;
  EXPECT_DOUBLE_EQ(parse_target("mse<0.25").threshold, 0.25);
}

TEST(StatisticsTest, HolmMatchesTheTextbookTable) {
  // Holm (1979), as worked on Wikipedia's "Holm–Bonferroni method" page: raw p 0.01, 0.04,
  // 0.03, 0.005 for H1..H4 adjust to 0.03, 0.06, 0.06, 0.02 (H4 4×0.005, H1 3×0.01, H3
  // 2×0.03, H2 max(0.06, 1×0.04)); at α = 0.05 only H1 and H4 are rejected.
  const std::vector<double> p = {0.01, 0.04, 0.03, 0.005};
  const std::vector<double> holm = adjust(p, Adjustment::holm);
  const std::vector<double> expected = {0.03, 0.06, 0.06, 0.02};
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(holm[i], expected[i], 1e-15) << i;
  const std::vector<double> bonferroni = adjust(p, Adjustment::bonferroni);
  const std::vector<double> times_four = {0.04, 0.16, 0.12, 0.02};
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(bonferroni[i], times_four[i], 1e-15) << i;
  EXPECT_EQ(adjust(p, Adjustment::none), p);
}

TEST(StatisticsTest, AdjustmentSkipsWhatIsNoComparisonAndCapsAtOne) {
  const double nan = std::nan("");
  const std::vector<double> holm = adjust({nan, 0.02, 0.5, 0.9}, Adjustment::holm);  // a family of 3
  EXPECT_TRUE(std::isnan(holm[0]));
  EXPECT_NEAR(holm[1], 0.06, 1e-15);
  EXPECT_NEAR(holm[2], 1.0, 1e-15);
  EXPECT_NEAR(holm[3], 1.0, 1e-15);
  EXPECT_EQ(parse_adjustment("bonferroni"), Adjustment::bonferroni);
  EXPECT_THROW(parse_adjustment("fdr"), Error);
}

}  // namespace
}  // namespace htm::stats
