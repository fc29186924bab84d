// The statistics behind `htm compare` and `htm report`: t-tests paired or not, effects as a
// share of the reference with their intervals, one-sided bounds against a target or a margin
// from the reference, and the
// adjustment of p-values for the number of comparisons. Plain functions on plain vectors.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace htm::stats {

double mean(const std::vector<double>& v);
/// Unbiased standard deviation; NaN with fewer than 2 values.
double sd(const std::vector<double>& v);

enum class TestKind { paired, welch };
const char* test_name(TestKind kind);  ///< "paired t" or "Welch t"

/// A two-sided t-test of a against b, with the difference of means (a − b) and its interval.
/// Every field but `kind` and `diff` is NaN when the test cannot be formed (fewer than 2 values
/// or pairs, or no spread).
struct TTest {
  TestKind kind = TestKind::welch;
  double diff = 0;              ///< mean(a) − mean(b)
  double t = 0, df = 0, p = 0;  ///< p: two-sided
  double ci_low = 0, ci_high = 0;
  double se = 0;  ///< standard error of diff
};

/// Welch's unequal-variance test (Welch–Satterthwaite degrees of freedom), as scipy's
/// ttest_ind(a, b, equal_var=False).
TTest welch_test(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95);
/// The paired test on a[i] − b[i] (same length; the pairs share a seed), as scipy's ttest_rel.
TTest paired_test(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95);

/// An effect as a share of the reference: 100·(mean(a)/mean(b) − 1) %, with the delta-method
/// interval of the ratio of means (its standard error counts the spread of both samples and,
/// when paired, their covariance), on the degrees of freedom of the test it accompanies.
struct Effect {
  double percent = 0, ci_low = 0, ci_high = 0;  ///< NaN where it cannot be formed
};
Effect percent_effect(const std::vector<double>& a, const std::vector<double>& b, const TTest& test,
                      double confidence = 0.95);

/// A claim about a metric's mean: "cluster_f1>=0.9" (operators >=, >, <=, <).
struct Target {
  std::string metric;    ///< as written: a name, or split/name
  bool at_least = true;  ///< >= or >: the claim is that the mean is above the threshold
  double threshold = 0;
  std::string text;  ///< as given, for tables
};
/// Parses "metric>=value"; throws htm::Error saying what was expected.
Target parse_target(const std::string& text);

/// The one-sided bound at `confidence` on the mean of `values` on the target's side (the lower
/// bound for >=, the upper for <=), and the one-sided p of the null hypothesis that the mean
/// is on the other side of the threshold. `met` is whether the bound clears the threshold.
struct TargetCheck {
  double bound = 0, p = 0;  ///< NaN with fewer than 2 values or no spread
  bool met = false;
};
TargetCheck check_target(const std::vector<double>& values, const Target& target, double confidence = 0.95);

/// A claim about each variant's difference from the reference: "cluster_f1>=-1%" (its mean minus
/// the reference's is at least -1 % of the reference's mean: not worse by more than 1 % where
/// higher is better), "mse<=2%" (where lower is better); without '%' the margin is in the metric's
/// units ("cluster_f1>=-0.01").
struct Margin {
  std::string metric;  ///< as written: a name, or split/name
  bool at_least = true;
  double value = 0;  ///< the margin as written: a percentage of the reference's mean where `percent`
  bool percent = false;
  std::string text;  ///< as given, for tables
};
/// Parses "metric>=-1%"; throws htm::Error saying what was expected.
Margin parse_margin(const std::string& text);

/// The one-sided bound at `confidence` on the difference `test` measured (variant − reference;
/// the lower bound for >=, the upper for <=), the margin in the metric's units (`threshold`:
/// a percentage taken of |reference_mean|), and the one-sided p of the null hypothesis that the
/// difference is beyond the margin. `met`: the bound clears the threshold (one comparison; among
/// several variants, adjust `p` over the family). NaN where the test could not be formed.
struct MarginCheck {
  double bound = 0, threshold = 0, p = 0;
  bool met = false;
};
MarginCheck check_margin(const TTest& test, double reference_mean, const Margin& margin, double confidence = 0.95);

/// How a family of p-values is adjusted for its size.
enum class Adjustment { holm, bonferroni, none };
Adjustment parse_adjustment(const std::string& text);  ///< "holm" | "bonferroni" | "none"
const char* adjustment_name(Adjustment adjustment);
/// Adjusted p-values, in the order given. NaN entries are not comparisons: they stay NaN and do
/// not count in the family's size. Holm's step-down: the k-th smallest of m p-values becomes
/// max over j ≤ k of min(1, (m − j + 1)·p_(j)).
std::vector<double> adjust(const std::vector<double>& p, Adjustment adjustment);

}  // namespace htm::stats
