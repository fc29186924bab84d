// A run's row as htm run records it: the description of its config and plugins, its artifact
// folder, and the row of a supervised run that crashed before it claimed one.
#include "commands/run_record.h"

#include <unistd.h>

#include <ctime>

#include <torch/version.h>

#include "commands/runner.h"
#include "process/launch.h"
#include "store/artifact_trust.h"
#include "store/results_store.h"
#include "study/seed_ledger.h"

namespace htm {
namespace {

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

RunInfo describe(const ResolvedConfig& config, const Registry& registry, const std::string& file, int64_t seed) {
  RunInfo info;
  info.experiment = config.experiment;
  info.source_file = file;
  info.variant = config.variant;
  info.seed = seed;
  info.config_toml = config.toml;
  info.config_hash = config.hash;
  info.git_revision = git_revision();
  info.torch_version = TORCH_VERSION;
  info.htm_version = HTM_VERSION;
  info.host = hostname();
  info.params = recorded_params(config, seed);  // with dataset.run_seed, which the seed ledger reads
  auto add = [&](PluginKind kind, const std::string& name) {
    const PluginEntry& entry = registry.entry(kind, name);
    info.plugins.push_back({kind_name(kind), name, entry.manifest.version, entry.path, registry.sha256(entry.path)});
  };
  add(PluginKind::dataset, config.dataset.name);
  add(PluginKind::adapter, config.adapter.name);
  add(PluginKind::policy, config.policy.name);
  add(PluginKind::merge, config.merge.name);
  for (const auto& [name, choice] : config.losses) add(PluginKind::loss, name);
  return info;
}

// results/runs/<experiment>/<variant>-seed<S>-<time>-<pid>: unique without asking the database.
// Its root is marked as htm's first (store/artifact_trust.h): htm serve, report, sample and export
// read, and a claim resumes, only run folders under a marked one.
std::string artifact_dir(const ResolvedConfig& config, const std::string& variant, int64_t seed) {
  mark_artifacts_root(config.settings.runtime.artifacts);
  const std::string name = run_file_name(variant, seed);
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return config.settings.runtime.artifacts + "/" + config.experiment + "/" + name + "-" + stamp + "-" +
         std::to_string(getpid());
}

void record_unclaimed_crash(const ResolvedConfig& config, const Registry& registry, const std::string& file,
                            const std::string& variant, int64_t seed, const std::string& message) {
  RunInfo info = describe(config, registry, file, seed);
  info.artifact_dir = artifact_dir(config, variant, seed);
  ResultsStore store(config.settings.runtime.results);
  store.finish_run(store.begin_run(info), RunStatus::failed, message);
}

}  // namespace htm
