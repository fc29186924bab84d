// From an experiment file to finished runs: resolve, assemble (train/experiment.h), train, record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/experiment_config.h"
#include "process/run_request.h"
#include "registry.h"
#include "train/experiment.h"
#include "train/trainer.h"

namespace htm {

/// `--shard K/N` as {K, N}: 0 ≤ K < N. Throws htm::Error with what was expected.
std::pair<int, int> parse_shard(const std::string& text);
/// The runs of shard K of N: entries K, K+N, K+2N, … of `work` (the same slices on every host).
template <typename T>
std::vector<T> shard_of(const std::vector<T>& work, int k, int n) {
  std::vector<T> mine;
  for (size_t i = static_cast<size_t>(k); i < work.size(); i += static_cast<size_t>(n)) mine.push_back(work[i]);
  return mine;
}

/// Runs every requested variant × seed; returns the process exit code (0 all finished,
/// 1 any failed, 130 interrupted). Prints one summary line per run.
int run_experiment(const RunRequest& request, const Registry& registry);

/// `htm resume RUN`: continues an interrupted, killed or crashed run from its checkpoint. The
/// experiment file (with `overrides`) must still resolve to the run's config hash. A run that
/// crashed kCrashesHeld times at one step is resumed only with `force`.
int resume_run(int64_t run_id, const std::string& db, const std::vector<std::string>& overrides,
               const std::vector<std::string>& sweeps, const Registry& registry, bool force = false);

/// `htm config`'s lines after a variant's config: its parameter count and training memory
/// estimate (train/memory.h) beside the memory available; a line saying why when it cannot be
/// built (its data missing, say).
void print_memory_estimate(const ResolvedConfig& config, const Registry& registry);

/// The git revision this binary was built from (with "-dirty" where tracked files differed from
/// it), or "unknown": fixed at build time (commands/build_revision.cpp).
std::string git_revision();

}  // namespace htm
