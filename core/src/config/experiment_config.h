// Experiment files: TOML with `extends`, variants, a grid, `--set` overrides and strict
// validation, resolved into one typed config per variant.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/plugin_catalog.h"
#include "config/settings.h"
#include "htm/value.h"

namespace htm {

/// A plugin chosen for a slot, with its parameters resolved (defaults filled in).
struct PluginChoice {
  std::string name;
  Params params;
};

/// A loss term: its plugin and the weight it carries in the total.
struct LossChoice : PluginChoice {
  double weight = 1;
};

/// One variant of an experiment with every value known.
struct ResolvedConfig {
  std::string experiment;  ///< [experiment] name (the file's stem when it names none)
  std::string variant;
  HostSettings settings;  ///< the host's settings, typed
  PluginChoice dataset, adapter, policy, merge;
  std::map<std::string, LossChoice> losses;     ///< by plugin name
  std::vector<PluginChoice> eval_policies;      ///< train.eval_policies at their defaults
  std::optional<PluginChoice> baseline_policy;  ///< estimator.baseline_policy at its defaults
  std::string toml;                             ///< the resolved config as a TOML document (stored with the run)
  std::string hash;                             ///< stable hash of `toml` (hex)

  /// Every value flattened, as stored in the params table: "train.lr", "policy.plugin",
  /// "policy.heads", "loss.mse.weight".
  std::map<std::string, Value> flattened() const;

 private:
  friend class ExperimentFile;
  std::map<std::string, Value> host_values_;  ///< the host settings as checked values
};

class ExperimentFile {
 public:
  /// Parses the file `name` and applies `overrides` ("train.epochs=2", values in TOML syntax,
  /// bare words taken as strings). A relative `name` that is no file here, and an `extends`
  /// name not found beside the including file, are looked up in htm's own experiments
  /// (experiment_search_path(): `htm run quickstart.toml` works from any folder).
  /// Throws htm::Error "FILE:LINE:COL: message" for malformed TOML.
  static ExperimentFile load(const std::string& name, const std::vector<std::string>& overrides = {});
  /// The same for TOML `text` (a stored run's resolved config); messages name it `label`.
  static ExperimentFile parse(const std::string& text, const std::string& label,
                              const std::vector<std::string>& overrides = {});
  ~ExperimentFile();
  ExperimentFile(ExperimentFile&&) noexcept;
  ExperimentFile& operator=(ExperimentFile&&) noexcept;

  const std::string& path() const { return path_; }
  /// `--sweep key=a,b,c`: adds the axis `key` with those values (TOML, or bare words taken as
  /// strings) to the file's [grid], so each value becomes a variant (crossed with the file's
  /// variants and grid, as a [grid] axis would be). Throws htm::Error naming the option.
  void add_sweep(const std::string& item);
  /// Variant names in the order the file declares them; {"default"} when it declares none.
  std::vector<std::string> variants() const;
  /// Resolves one variant: base tables, then the variant's overrides, then `--set` overrides,
  /// validated against host_schema() and the plugins' manifests. Throws htm::Error
  /// "FILE:LINE:COL: message" naming what was expected (known names for plugins).
  ResolvedConfig resolve(const std::string& variant, const PluginCatalog& catalog) const;

 private:
  struct Parsed;  ///< the file merged over what it extends, and the --set overrides

  ExperimentFile() = default;
  std::string path_;
  std::unique_ptr<Parsed> parsed_;
};

/// Folders searched for an `extends` name not found beside the including file: the
/// HTM_EXPERIMENTS_PATH folders (':'-separated), then htm's installed and source experiments.
std::vector<std::string> experiment_search_path();

}  // namespace htm
