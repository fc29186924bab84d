// What a plugin says about itself before anything of it runs.
#pragma once

#include <string>
#include <vector>

#include "htm/value.h"

namespace htm {

/// The SDK's binary interface, major.minor. The major is bumped whenever a header in
/// core/include/htm changes a class layout, a virtual signature or what a function means; the
/// registry refuses a plugin built for another major. The minor is bumped (and reset with the
/// major) for additions only, such as a new function in the SDK library: a plugin built on
/// newer headers may call what an older host lacks, so the registry refuses a plugin whose minor
/// is above its own, and accepts one built on older headers of the same major.
constexpr int kSdkAbiVersion = 6;
constexpr int kSdkAbiMinor = 3;  // 6.1: greedy_disjoint_pairs; 6.2: Params::integer_or; 6.3: BuildContext::layers

/// A dataset whose data follow the run's seed declares an integer parameter of this name: the
/// host sets it to the run's seed when it builds the dataset (an experiment file may not), and
/// the seed ledger (htm run --confirm) then knows that each seed draws data of its own. A dataset
/// without it gives every seed the same data.
constexpr const char* kRunSeedParam = "run_seed";
/// A dataset that declares kRunSeedParam and also this boolean parameter follows the run's seed
/// only where it is true; false: every seed draws the same data, from the dataset's own settings.
constexpr const char* kPerRunParam = "per_run";

enum class PluginKind { policy, merge, loss, adapter, dataset };

const char* kind_name(PluginKind kind);
/// Parses "policy", "merge", ...; returns false for anything else.
bool parse_kind(const std::string& text, PluginKind* kind);

struct Manifest {
  std::string name;  ///< unique within its kind, e.g. "learned"
  PluginKind kind;
  std::string version;  ///< bump when what it computes changes; runs record it
  int abi = kSdkAbiVersion;
  std::string description;  ///< one line, with the paper section where there is one
  std::vector<ParamSpec> params;
};

}  // namespace htm
