// Which runs a request names (selection.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "commands/runner.h"

namespace htm {

/// The seeds a request runs of one variant. Exploration (the default) never touches a
/// confirmation seed; --confirm runs only those (docs/statistics.md). Throws htm::Error naming
/// `file` for a seed on the wrong side.
std::vector<int64_t> seeds_of(const RunRequest& request, const ExperimentSettings& experiment, const std::string& file);

/// The runs of `work` still to train: each finished one (unless request.rerun) is skipped with
/// the line run_one would print, without the cost of a child process.
std::vector<std::pair<std::string, int64_t>> unfinished(const RunRequest& request, const ExperimentFile& file,
                                                        const Registry& registry,
                                                        const std::vector<std::pair<std::string, int64_t>>& work);

}  // namespace htm
