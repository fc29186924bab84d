// Which runs a request names (selection.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands/runner.h"

namespace htm {

/// The seeds a request runs of one variant. Exploration (the default) never touches a
/// confirmation seed; --confirm runs only those (docs/statistics.md). Throws htm::Error naming
/// `file` for a seed on the wrong side.
std::vector<int64_t> seeds_of(const RunRequest& request, const ExperimentSettings& experiment, const std::string& file);

/// One run of a study, its variant resolved once (the config shared by the variant's seeds): what
/// every stage of htm run reads instead of resolving the variant again.
struct PlannedRun {
  std::string variant;
  int64_t seed = 0;
  std::shared_ptr<const ResolvedConfig> config;
  /// "experiment/variant seed S"
  std::string label() const;
};

/// A request's runs: variants × seeds, repeats collapsed, every variant resolved first so that
/// any config error is reported before a single run starts; the results database and the logs
/// folder they go to (the last variant's).
struct StudyPlan {
  std::vector<PlannedRun> runs;
  std::string results, logs;
  /// A variant's config; nullptr when the plan has no run of it.
  const ResolvedConfig* config_of(const std::string& variant) const;
};
StudyPlan plan_study(const RunRequest& request, const ExperimentFile& file, const Registry& registry);

/// What a run will cost, guessed from its config alone, in units of one row of width 1 through one
/// layer (only its order against other runs' means anything): the training steps, each of
/// batch × rollouts rows through `layers` layers of width C, C², plus a fixed 300,000 a step (a
/// small model's step is mostly its ops' fixed cost: Trees at width 16 took 10 ms a step against
/// 33 ms at width 64, docs/performance.md), and every evaluation's passes at a third of a
/// training row. Data it cannot see (train_samples = 0: the whole dataset) counts as 4,096 samples.
double planned_cost(const ResolvedConfig& config);
/// The runs longest first by planned_cost, ties in the plan's order: under --jobs N > 1 the short
/// runs come last and fill the jobs' ends (longest-processing-time-first scheduling).
std::vector<PlannedRun> longest_first(std::vector<PlannedRun> runs);

/// Each run's (variant, seed), in order: what a child process is told.
std::vector<std::pair<std::string, int64_t>> pairs_of(const std::vector<PlannedRun>& runs);

/// The runs still to train: each finished one (unless request.rerun) is skipped with the line
/// run_one would print, without the cost of a child process.
std::vector<std::pair<std::string, int64_t>> unfinished(const RunRequest& request, const std::vector<PlannedRun>& runs);

}  // namespace htm
