// A run's row as htm run records it (run_record.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "config/experiment_config.h"
#include "registry.h"
#include "store/results_store.h"

namespace htm {

/// The row's description of a run of `config` with `seed`, from experiment file `file`.
RunInfo describe(const ResolvedConfig& config, const Registry& registry, const std::string& file, int64_t seed);
/// results/runs/<experiment>/<variant>-seed<S>-<time>-<pid>: unique without asking the database.
/// Marks runtime.artifacts as the folder htm run writes runs under (mark_artifacts_root), which
/// throws htm::Error when it cannot.
std::string artifact_dir(const ResolvedConfig& config, const std::string& variant, int64_t seed);
/// A supervised child crashed before it claimed its run (a plugin's constructor, the first
/// pass): a `failed` row with `message`, so that htm runs shows the attempt. `config`: its
/// variant's, from experiment file `file`.
void record_unclaimed_crash(const ResolvedConfig& config, const Registry& registry, const std::string& file,
                            const std::string& variant, int64_t seed, const std::string& message);

}  // namespace htm
