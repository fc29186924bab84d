// From an experiment file to finished runs: resolve, assemble plugins, train, record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experiment_config.h"
#include "registry.h"
#include "trainer.h"

namespace htm {

struct RunRequest {
  std::string file;
  std::vector<std::string> overrides;  ///< --set k=v
  std::vector<std::string> variants;   ///< empty: all
  std::vector<int64_t> seeds;          ///< empty: the file's [experiment] seeds
  int jobs = 1;
  bool force = false;                  ///< run again even when a finished run exists
};

/// Builds dataset, adapter, policy, merge operator, losses and the model of one resolved config.
/// Seeds torch's global generator with `seed` first, so initial weights depend on it alone.
Experiment assemble(const ResolvedConfig& config, const Registry& registry, int64_t seed);

/// Threads for torch: runtime.threads, or every core when it is 0.
void set_threads(int64_t threads);

/// Runs every requested variant × seed; returns the process exit code (0 all finished,
/// 1 any failed, 130 interrupted). Prints one summary line per run.
int run_experiment(const RunRequest& request, const Registry& registry);

/// The checkout's git revision (with "-dirty" for uncommitted changes), or "unknown".
std::string git_revision();

}  // namespace htm
