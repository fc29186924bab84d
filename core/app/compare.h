// `htm compare`: per-variant statistics of a metric over seeds, against a reference variant.
#pragma once

#include <string>
#include <vector>

namespace htm {

struct WelchResult {
  double t = 0;        ///< (mean_a − mean_b) / sqrt(var_a/n_a + var_b/n_b)
  double df = 0;       ///< Welch–Satterthwaite degrees of freedom
  double p_value = 1;  ///< two-sided; NaN when either sample has fewer than 2 values or no spread
};

/// Welch's unequal-variance t-test of sample a against sample b.
WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace htm
