// Which runs a request names: the seeds of a variant (exploration or confirmation), the ones
// still to train, a shard's slice, and a run's file name.
#include "commands/selection.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>

#include "htm/error.h"
#include "process/launch.h"
#include "store/results_store.h"

namespace htm {

// The seeds a request runs of one variant. Exploration (the default) never touches a
// confirmation seed; --confirm runs only those, so no claim rests on the seeds a variant was
// chosen on (docs/statistics.md).
std::vector<int64_t> seeds_of(const RunRequest& request, const ExperimentSettings& experiment,
                              const std::string& file) {
  const auto& confirm = experiment.confirm_seeds;
  const auto is_confirm = [&](int64_t s) { return std::find(confirm.begin(), confirm.end(), s) != confirm.end(); };
  std::string listed;
  for (int64_t s : confirm) listed += (listed.empty() ? "" : ", ") + std::to_string(s);
  if (request.confirm) {
    for (int64_t s : request.seeds)
      if (!is_confirm(s))
        throw Error("--confirm --seed " + std::to_string(s) + ": not one of " + file +
                    "'s confirmation seeds (experiment.confirm_seeds: " + listed + ")");
    return request.seeds.empty() ? confirm : request.seeds;
  }
  const std::vector<int64_t> seeds = request.seeds.empty() ? experiment.seeds : request.seeds;
  for (int64_t s : seeds)
    if (is_confirm(s))
      throw Error("seed " + std::to_string(s) + " is one of " + file +
                  "'s confirmation seeds (experiment.confirm_seeds: " + listed +
                  "): freeze the variant, then run it with --confirm --variant V");
  return seeds;
}

// The runs of `work` a child must be started for: a finished one is skipped here, as run_one
// would, without the cost of a process.
std::vector<std::pair<std::string, int64_t>> unfinished(const RunRequest& request, const ExperimentFile& file,
                                                        const Registry& registry,
                                                        const std::vector<std::pair<std::string, int64_t>>& work) {
  if (request.rerun) return work;
  std::vector<std::pair<std::string, int64_t>> left;
  std::map<std::string, std::unique_ptr<ResultsStore>> stores;
  for (const auto& [variant, seed] : work) {
    const ResolvedConfig config = file.resolve(variant, registry);
    auto& store = stores[config.settings.runtime.results];
    if (!store) store = std::make_unique<ResultsStore>(config.settings.runtime.results);
    if (auto done = store->find_finished(config.experiment, variant, seed, config.hash))
      std::printf("[%s/%s seed %lld] already finished as run %lld in %s; skipped (--rerun runs it again)\n",
                  config.experiment.c_str(), variant.c_str(), static_cast<long long>(seed),
                  static_cast<long long>(*done), store->path().c_str());
    else
      left.emplace_back(variant, seed);
  }
  std::fflush(stdout);
  return left;
}

// "<variant>-seed<S>" as one safe path component: a variant's name may hold anything TOML allows.
std::string run_file_name(const std::string& variant, int64_t seed) {
  std::string name = variant + "-seed" + std::to_string(seed);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("-_.=,+").find(c) == std::string::npos) c = '_';
  if (name[0] == '.') name[0] = '_';
  return name;
}

std::pair<int, int> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos)
      throw Error("--shard " + text + ": expected K/N with 0 <= K < N, e.g. --shard 0/4");
    return std::stoi(part);
  };
  if (slash == std::string::npos) throw Error("--shard " + text + ": expected K/N with 0 <= K < N, e.g. --shard 0/4");
  const int k = number(text.substr(0, slash)), n = number(text.substr(slash + 1));
  if (n < 1) throw Error("--shard " + text + ": N must be at least 1");
  if (k >= n) throw Error("--shard " + text + ": K must be in 0.." + std::to_string(n - 1) + " (shards count from 0)");
  return {k, n};
}

}  // namespace htm
