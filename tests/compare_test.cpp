// Welch's t-test behind `htm compare`, against the t distribution integrated numerically.
#include <cmath>

#include "compare.h"
#include "test_util.h"

namespace htm {
namespace {

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

TEST(WelchTest, MatchesTheTDistributionByHand) {
  // a: mean 3, var 2.5; b: mean 6, var 10 → t = −3/√2.5, df = 2.5² / (0.5²/4 + 2²/4).
  auto r = welch_t_test({1, 2, 3, 4, 5}, {2, 4, 6, 8, 10});
  EXPECT_NEAR(r.t, -3 / std::sqrt(2.5), 1e-12);
  EXPECT_NEAR(r.df, 6.25 / (0.0625 + 1.0), 1e-12);
  EXPECT_NEAR(r.p_value, two_sided_tail(r.t, r.df), 1e-6);
  EXPECT_GT(r.p_value, 0.05);
  // Clearly different samples give a small p; the test is symmetric.
  auto s = welch_t_test({0.10, 0.11, 0.09, 0.10, 0.12}, {0.20, 0.21, 0.19, 0.22, 0.20});
  EXPECT_LT(s.p_value, 1e-4);
  EXPECT_NEAR(s.p_value, welch_t_test({0.20, 0.21, 0.19, 0.22, 0.20}, {0.10, 0.11, 0.09, 0.10, 0.12}).p_value, 1e-15);
  EXPECT_NEAR(s.p_value, two_sided_tail(s.t, s.df), 1e-6);
}

TEST(WelchTest, UndefinedForTooFewValuesOrNoSpread) {
  EXPECT_TRUE(std::isnan(welch_t_test({1.0}, {2.0, 3.0}).p_value));
  EXPECT_TRUE(std::isnan(welch_t_test({1.0, 1.0}, {1.0, 1.0}).p_value));
}

}  // namespace
}  // namespace htm
