// `htm compare`: per-variant statistics of a metric over seeds, against a reference variant.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace htm {

struct WelchResult {
  double t = 0;        ///< (mean_a − mean_b) / sqrt(var_a/n_a + var_b/n_b)
  double df = 0;       ///< Welch–Satterthwaite degrees of freedom
  double p_value = 1;  ///< two-sided; NaN when either sample has fewer than 2 values or no spread
};

/// Welch's unequal-variance t-test of sample a against sample b.
WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b);

/// One variant's line of `htm compare`: the last value of a metric in each finished run.
struct CompareRow {
  std::string variant;
  std::vector<double> values;  ///< one per finished run (seed), in run order
  double mean = 0, sd = 0;     ///< sd: NaN with fewer than 2 values
  double diff = 0;             ///< mean − the reference's mean (0 for the reference)
  double ci_low = 0, ci_high = 0;  ///< 95 % Welch interval of diff; NaN when it cannot be formed
  double p_value = 0;          ///< Welch's two-sided p against the reference; NaN for it
  size_t configs = 1;          ///< distinct resolved configs pooled in this variant
};

/// Which runs a comparison takes: those whose config hash starts with `hash` (when given) and
/// that carry every `tags` key=value.
struct RunFilter {
  std::string hash;
  std::vector<std::pair<std::string, std::string>> tags;
};

class ResultsStore;
/// The comparison `htm compare` prints (and `htm report` shows) of `split`/`metric` in the
/// experiment's finished runs, variants in first-run order. `reference` empty: the first
/// variant (it is set to the one used). Throws htm::Error when nothing matches.
std::vector<CompareRow> compare_variants(ResultsStore& store, const std::string& experiment, const std::string& split,
                                         const std::string& metric, std::string& reference,
                                         const RunFilter& filter = {});

}  // namespace htm
