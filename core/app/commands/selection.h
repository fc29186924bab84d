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

/// Each run's (variant, seed), in order: what a child process is told.
std::vector<std::pair<std::string, int64_t>> pairs_of(const std::vector<PlannedRun>& runs);

/// The runs still to train: each finished one (unless request.rerun) is skipped with the line
/// run_one would print, without the cost of a child process.
std::vector<std::pair<std::string, int64_t>> unfinished(const RunRequest& request, const std::vector<PlannedRun>& runs);

}  // namespace htm
