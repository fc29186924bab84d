// Which runs a request names: the seeds of a variant (exploration or confirmation), the study's
// plan (each variant resolved once), the runs still to train, a shard's slice, a run's file name.
#include "commands/selection.h"

#include <algorithm>
#include <cctype>
#include <cmath>
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

std::string PlannedRun::label() const { return config->experiment + "/" + variant + " seed " + std::to_string(seed); }

const ResolvedConfig* StudyPlan::config_of(const std::string& variant) const {
  for (const auto& run : runs)
    if (run.variant == variant) return run.config.get();
  return nullptr;
}

StudyPlan plan_study(const RunRequest& request, const ExperimentFile& file, const Registry& registry) {
  StudyPlan plan;
  for (const auto& variant : request.variants.empty() ? file.variants() : request.variants) {
    if (plan.config_of(variant) != nullptr) continue;  // --variant v --variant v: once
    auto config = std::make_shared<const ResolvedConfig>(file.resolve(variant, registry));
    plan.results = config->settings.runtime.results;
    plan.logs = config->settings.runtime.artifacts + "/" + config->experiment + "/logs";
    std::vector<int64_t> seeds;
    for (int64_t seed : seeds_of(request, config->settings.experiment, request.file))
      if (std::find(seeds.begin(), seeds.end(), seed) == seeds.end()) seeds.push_back(seed);
    for (int64_t seed : seeds) plan.runs.push_back({variant, seed, config});
  }
  return plan;
}

double planned_cost(const ResolvedConfig& config) {
  const TrainSettings& train = config.settings.train;
  const ModelSettings& model = config.settings.model;
  const double samples = train.train_samples > 0 ? static_cast<double>(train.train_samples) : 4096;
  const double batch = static_cast<double>(std::max<int64_t>(1, train.batch_size));
  double steps = static_cast<double>(train.epochs) * std::ceil(samples / batch);
  if (train.max_steps > 0) steps = std::min(steps, static_cast<double>(train.max_steps));
  const double width = static_cast<double>(std::max<int64_t>(1, model.dim));
  const double row = width * width * static_cast<double>(std::max<int64_t>(1, model.layers));
  const double rows = batch * static_cast<double>(std::max<int64_t>(1, config.settings.estimator.rollouts));
  double evaluations = static_cast<double>(train.epochs);
  if (train.eval_every > 0) evaluations += std::floor(steps / static_cast<double>(train.eval_every));
  const double passes = 1.0 + static_cast<double>(train.eval_policies.size()) + (train.eval_greedy ? 1 : 0);
  const double eval_rows = train.eval_samples > 0 ? static_cast<double>(train.eval_samples) : 4096;
  return steps * (rows * row + 300000) + evaluations * passes * eval_rows * row / 3;
}

std::vector<PlannedRun> longest_first(std::vector<PlannedRun> runs) {
  std::vector<double> cost;
  for (const auto& run : runs) cost.push_back(planned_cost(*run.config));
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<PlannedRun> sorted;
  for (size_t i : order) sorted.push_back(runs[i]);
  return sorted;
}

std::vector<std::pair<std::string, int64_t>> pairs_of(const std::vector<PlannedRun>& runs) {
  std::vector<std::pair<std::string, int64_t>> pairs;
  for (const auto& run : runs) pairs.emplace_back(run.variant, run.seed);
  return pairs;
}

// The runs a child must be started for: a finished one is skipped here, as run_one would, without
// the cost of a process.
std::vector<std::pair<std::string, int64_t>> unfinished(const RunRequest& request,
                                                        const std::vector<PlannedRun>& runs) {
  if (request.rerun) return pairs_of(runs);
  std::vector<std::pair<std::string, int64_t>> left;
  std::map<std::string, std::unique_ptr<ResultsStore>> stores;
  for (const auto& run : runs) {
    const ResolvedConfig& config = *run.config;
    auto& store = stores[config.settings.runtime.results];
    if (!store) store = std::make_unique<ResultsStore>(config.settings.runtime.results);
    if (auto done = store->find_finished(config.experiment, run.variant, run.seed, config.hash))
      std::printf("[%s] already finished as run %lld in %s; skipped (--rerun runs it again)\n", run.label().c_str(),
                  static_cast<long long>(*done), store->path().c_str());
    else
      left.emplace_back(run.variant, run.seed);
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
