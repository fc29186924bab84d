// The seed ledger: which runs drew which data. A confirmation is evidence only on data that no
// earlier run generated (no variant was chosen on it), so htm run --confirm refuses seeds whose
// data an earlier run of the database already drew, and htm compare says when confirmation runs
// share data with other runs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/experiment_config.h"

namespace htm {

class ResultsStore;

/// The data a run draws, as text: its recorded dataset.* parameters (TOML values), which include
/// dataset.run_seed where the dataset's data follow the run's seed (htm::kRunSeedParam). Two runs
/// with one key drew the same data.
std::string data_key(const std::map<std::string, std::string>& dataset_params);

/// The parameters a run of `config` at `seed` records: config.flattened(), plus dataset.run_seed
/// where the dataset's data follow the seed (what the ledger reads back).
std::map<std::string, Value> recorded_params(const ResolvedConfig& config, int64_t seed);

/// The key of the data `config` draws at `seed`: data_key() of its recorded dataset.* parameters.
std::string data_key(const ResolvedConfig& config, int64_t seed);

/// True when the dataset `config` names draws data of its own for every seed.
bool data_follow_seed(const ResolvedConfig& config);

struct DataUse {
  int64_t run = 0, seed = 0;
  std::string experiment, variant, phase;  ///< phase: "confirm", or "" for exploration
};

/// Every run of `store`, by the key of the data it drew, in run order.
std::map<std::string, std::vector<DataUse>> data_uses(ResultsStore& store);

/// Of `uses`, those that are not runs of `experiment`'s confirmation (whose variants share their
/// seeds' data by design: that is the paired comparison).
std::vector<DataUse> outside_confirmation(const std::vector<DataUse>& uses, const std::string& experiment);

/// Lines for htm compare about `experiment`'s runs and the ledger: its confirmation runs drew data
/// that runs outside its confirmation drew too (not fresh data), or its exploration runs drew data
/// that another experiment's confirmation drew (that confirmation's data are no longer unseen).
/// Each names the seeds and some of the other runs; empty when neither holds.
std::vector<std::string> shared_data_warnings(ResultsStore& store, const std::string& experiment);

/// htm run --confirm's check, before any run: a seed of `work` whose data an earlier run of its
/// results database drew (any experiment, either phase, except `file`'s own confirmation, whose
/// variants share each seed's data by design) is refused with htm::Error naming those runs; with
/// `reuse` it is said on stderr and allowed.
void check_fresh_data(const ExperimentFile& file, const PluginCatalog& catalog,
                      const std::vector<std::pair<std::string, int64_t>>& work, bool reuse);

/// "run 3 (htm-x/learned seed 0, exploration)", at most `limit` of them, then "and N more".
std::string describe_uses(const std::vector<DataUse>& uses, size_t limit = 4);

}  // namespace htm
