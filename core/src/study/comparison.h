// A study's variants compared (`htm compare`, and the final values of `htm report` and htm serve's
// study page): per variant and phase, a metric's last value
// in each seed's latest finished run, tested against a reference variant (paired by seed where
// the two share their seeds, Welch otherwise), effects as % of the reference with their CI,
// p-values adjusted over every comparison of a phase, one-sided bounds against targets and
// margins from the reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "stats/statistics.h"

namespace htm {

/// Which runs a comparison takes: those whose config hash starts with `hash` and whose git
/// revision starts with `revision` (when given), with a seed in [first_seed, last_seed], and
/// that carry every `tags` key=value.
struct RunFilter {
  std::string hash;
  std::string revision;
  int64_t first_seed = INT64_MIN, last_seed = INT64_MAX;
  std::vector<std::pair<std::string, std::string>> tags;
  bool any() const { return !hash.empty() || !revision.empty() || !tags.empty() || first_seed != INT64_MIN; }
};

struct CompareRequest {
  std::string experiment;
  std::vector<std::string> metrics;  ///< "split/name", in column order
  std::string reference;             ///< empty: the variant of the first run (set to the one used)
  RunFilter filter;
  stats::Adjustment adjustment = stats::Adjustment::holm;
  std::vector<stats::Target> targets;  ///< metric as "split/name"; each target's metric is compared
  std::vector<stats::Margin> margins;  ///< the same for margins from the reference (`htm compare --margin`)
  double collapse = -1;                ///< > 0: count the runs whose last value is more than this below their peak
};

/// One variant's line in one phase.
struct CompareRow {
  std::string variant;
  std::vector<int64_t> seeds;  ///< ascending
  std::vector<double> values;  ///< one per seed, the seed's latest finished run
  double mean = 0, sd = 0;     ///< sd: NaN with fewer than 2 values
  bool reference = false;
  bool tested = false;    ///< a test against the reference was made (not the reference)
  stats::TTest test;      ///< against the reference; NaN fields when it cannot be formed
  stats::Effect effect;   ///< (mean / the reference's mean − 1) as %, with its CI
  double p_adjusted = 0;  ///< test.p adjusted over the phase's family
  size_t configs = 1;     ///< distinct config hashes pooled in this variant
  std::vector<std::string> hashes;
  bool has_target = false;
  stats::TargetCheck target;
  bool has_margin = false;  ///< tested, and the metric has a margin
  stats::MarginCheck margin;
  double margin_p_adjusted = 0;  ///< margin.p adjusted over the phase's margins; met when below 0.05
  int collapsed = -1;            ///< runs more than CompareRequest::collapse below their peak; -1 not counted
};

/// The runs of one phase. "explore": every run not tagged phase=confirm (the seeds variants were
/// chosen on); "confirm": runs of `htm run --confirm` on the confirmation seeds. Never pooled.
inline constexpr const char* kPhases[] = {"explore", "confirm"};
struct PhaseTable {
  std::string phase;
  std::vector<CompareRow> rows;  ///< variants in first-run order
  bool has_reference = false;    ///< the reference ran in this phase (else nothing is tested)
  size_t family = 0;             ///< comparisons adjusted together (variants × metrics of the phase)
  size_t margins = 0;            ///< margin claims adjusted together (theirs is a family of its own)
};

struct MetricTable {
  std::string metric;  ///< split/name
  bool has_target = false;
  stats::Target target;
  bool has_margin = false;
  stats::Margin margin;
  std::vector<PhaseTable> phases;  ///< explore first; a phase without runs is left out
  std::string missing;             ///< why there is nothing to compare (then phases is empty)
};

struct Comparison {
  std::string reference;
  stats::Adjustment adjustment = stats::Adjustment::holm;
  std::vector<MetricTable> metrics;
  std::vector<std::string> warnings;  ///< e.g. a variant confirmed under another config than explored
};

class ResultsStore;
/// The comparison of every requested metric in the experiment's finished runs. Throws
/// htm::Error when the experiment has no finished run or the reference variant is unknown;
/// a metric without values gets MetricTable::missing.
Comparison compare_study(ResultsStore& store, CompareRequest& request);

/// "split/name" for a metric written with or without its split ("loss/mse" is a name: only a
/// leading "test/" or "train/" is taken for a split).
std::string qualified_metric(const std::string& metric, const std::string& split);

/// "0-2", "1000-1009" or "0, 3, 7": a seed list for a table's heading.
std::string seed_list(std::vector<int64_t> seeds);

}  // namespace htm
