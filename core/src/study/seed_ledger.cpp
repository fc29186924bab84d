#include "study/seed_ledger.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "htm/dataset.h"
#include "htm/error.h"
#include "htm/manifest.h"
#include "htm/value.h"
#include "store/results_store.h"

namespace htm {

std::string data_key(const std::map<std::string, std::string>& dataset_params) {
  std::string key;
  for (const auto& [name, value] : dataset_params) key += name + " = " + value + "\n";
  return key;
}

bool data_follow_seed(const ResolvedConfig& config) { return data_follow_run_seed(config.dataset.params); }

std::map<std::string, Value> recorded_params(const ResolvedConfig& config, int64_t seed) {
  std::map<std::string, Value> params = config.flattened();
  if (data_follow_seed(config)) params[std::string("dataset.") + kRunSeedParam] = Value(seed);
  return params;
}

std::string data_key(const ResolvedConfig& config, int64_t seed) {
  std::map<std::string, std::string> params;  // as the store writes them: TOML text
  for (const auto& [name, value] : recorded_params(config, seed))
    if (name.rfind("dataset.", 0) == 0) params[name] = to_toml(value);
  return data_key(params);
}

std::map<std::string, std::vector<DataUse>> data_uses(ResultsStore& store) {
  std::map<int64_t, std::pair<DataUse, std::map<std::string, std::string>>> runs;
  store.scan(
      "SELECT r.id, r.seed, e.name, r.variant, "
      "coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), ''), p.key, p.value "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id "
      "JOIN params p ON p.run_id = r.id AND p.key LIKE 'dataset.%' ORDER BY r.id",
      {}, [&](const Row& row) {
        auto& [use, params] = runs[row.integer(0)];
        use = {row.integer(0), row.integer(1), row.text(2), row.text(3), row.text(4)};
        params[row.text(5)] = row.text(6);
      });
  std::map<std::string, std::vector<DataUse>> by_key;
  for (const auto& [id, run] : runs) by_key[data_key(run.second)].push_back(run.first);
  return by_key;
}

std::vector<DataUse> outside_confirmation(const std::vector<DataUse>& uses, const std::string& experiment) {
  std::vector<DataUse> out;
  for (const DataUse& u : uses)
    if (!(u.phase == "confirm" && u.experiment == experiment)) out.push_back(u);
  return out;
}

std::vector<std::string> shared_data_warnings(ResultsStore& store, const std::string& experiment) {
  std::set<int64_t> confirmed_seeds, explored_seeds;
  std::vector<DataUse> others, confirmations;
  for (const auto& [key, uses] : data_uses(store)) {
    std::set<int64_t> confirmed, explored;
    std::vector<DataUse> their_confirmations;
    for (const DataUse& u : uses) {
      if (u.experiment == experiment) (u.phase == "confirm" ? confirmed : explored).insert(u.seed);
      if (u.experiment != experiment && u.phase == "confirm") their_confirmations.push_back(u);
    }
    const std::vector<DataUse> outside = outside_confirmation(uses, experiment);
    if (!confirmed.empty() && !outside.empty()) {  // this confirmation was not on fresh data
      confirmed_seeds.insert(confirmed.begin(), confirmed.end());
      others.insert(others.end(), outside.begin(), outside.end());
    } else if (!explored.empty() && !their_confirmations.empty()) {  // it explored another's confirmation data
      explored_seeds.insert(explored.begin(), explored.end());
      confirmations.insert(confirmations.end(), their_confirmations.begin(), their_confirmations.end());
    }
  }
  const auto listed = [](const std::set<int64_t>& seeds) {
    std::string text;
    for (int64_t s : seeds) text += (text.empty() ? "" : ", ") + std::to_string(s);
    return text;
  };
  std::vector<std::string> out;
  if (!confirmed_seeds.empty())
    out.push_back("the confirmation seeds " + listed(confirmed_seeds) + " of '" + experiment +
                  "' drew data that other runs drew too (" + describe_uses(others, 3) +
                  "): that confirmation is not on fresh data");
  if (!explored_seeds.empty())
    out.push_back("the exploration seeds " + listed(explored_seeds) + " of '" + experiment +
                  "' drew data that another experiment's confirmation drew (" + describe_uses(confirmations, 3) +
                  "): those confirmation data are no longer unseen");
  return out;
}

std::string describe_uses(const std::vector<DataUse>& uses, size_t limit) {
  std::string text;
  for (size_t i = 0; i < uses.size() && i < limit; ++i) {
    const DataUse& u = uses[i];
    text += (i == 0 ? "" : ", ") + std::string("run ") + std::to_string(u.run) + " (" + u.experiment + "/" + u.variant +
            " seed " + std::to_string(u.seed) + ", " + (u.phase == "confirm" ? "confirmation" : "exploration") + ")";
  }
  if (uses.size() > limit) text += " and " + std::to_string(uses.size() - limit) + " more";
  return text;
}

void check_fresh_data(const ExperimentFile& file, const PluginCatalog& catalog,
                      const std::vector<std::pair<std::string, int64_t>>& work, bool reuse) {
  std::map<std::string, std::map<std::string, std::vector<DataUse>>> ledgers;  // database → key → uses
  std::map<std::string, ResolvedConfig> configs;                               // variant → its config
  std::vector<std::string> reused;
  std::set<std::string> seen;
  for (const auto& [variant, seed] : work) {
    auto at = configs.find(variant);
    if (at == configs.end()) at = configs.emplace(variant, file.resolve(variant, catalog)).first;
    const ResolvedConfig& config = at->second;
    const std::string& db = config.settings.runtime.results;
    if (!std::filesystem::exists(db)) continue;  // a new database: nothing drawn yet
    if (!ledgers.count(db)) {
      ResultsStore store(db, OpenMode::read_only);
      ledgers[db] = data_uses(store);
    }
    const std::string key = data_key(config, seed);
    if (!seen.insert(db + "\n" + key).second) continue;  // said for this seed's data already
    const auto found = ledgers[db].find(key);
    if (found == ledgers[db].end()) continue;
    const std::vector<DataUse> earlier = outside_confirmation(found->second, config.experiment);
    if (earlier.empty()) continue;
    reused.push_back("seed " + std::to_string(seed) + ": " + describe_uses(earlier) +
                     (data_follow_seed(config)
                          ? ""
                          : " (dataset '" + config.dataset.name + "' draws the same data for every seed)"));
  }
  if (reused.empty()) return;
  std::string list;
  for (const auto& line : reused) list += "\n  " + line;
  if (!reuse)
    throw Error("--confirm: earlier runs already drew the data of " + std::to_string(reused.size()) +
                " confirmation seed(s), so a variant may have been chosen on it:" + list +
                "\nchoose fresh seeds (experiment.confirm_seeds) or give --reuse-seeds to confirm on them anyway");
  std::fprintf(stderr, "warning: --reuse-seeds: this confirmation is not on fresh data:%s\n", list.c_str());
}

}  // namespace htm
