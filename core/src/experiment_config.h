// Experiment files: TOML with `extends`, variants, `--set` overrides and strict validation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "htm/manifest.h"
#include "htm/value.h"

namespace htm {

/// What the config needs to know about plugins; implemented by the registry (and by tests).
class PluginCatalog {
 public:
  virtual ~PluginCatalog();
  /// The manifest of plugin `name` of `kind`, or nullptr when none is known.
  virtual const Manifest* find(PluginKind kind, const std::string& name) const = 0;
  /// Known names of a kind, sorted, for "expected one of" messages.
  virtual std::vector<std::string> names(PluginKind kind) const = 0;
};

/// A plugin chosen for a slot, with its parameters resolved (defaults filled in).
struct PluginChoice {
  std::string name;
  Params params;
};

/// One variant of an experiment with every value known.
struct ResolvedConfig {
  std::string experiment;  ///< [experiment] name
  std::string variant;
  std::map<std::string, Value> values;  ///< every host setting, flattened: "train.lr" -> 0.0001
  PluginChoice dataset, adapter, policy, merge;
  std::map<std::string, PluginChoice> losses;  ///< by plugin name; each has a "weight" value
  std::string toml;  ///< the resolved config as a TOML document (stored with the run)
  std::string hash;  ///< stable hash of `toml` (hex)

  /// Typed access to host settings; throws htm::Error if absent or of another type.
  int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  bool flag(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;
  std::vector<double> numbers(const std::string& key) const;
  /// Flattened view including plugin slots ("policy.plugin", "policy.heads", "loss.mse.weight").
  std::map<std::string, Value> flattened() const;
};

/// The host's own settings, section by section (experiment, model, train, estimator, runtime).
const std::vector<std::pair<std::string, std::vector<ParamSpec>>>& host_schema();

class ExperimentFile {
 public:
  /// Parses `path` (following `extends`, relative to the including file) and applies
  /// `overrides` ("train.epochs=2", values in TOML syntax, bare words taken as strings).
  /// Throws htm::Error "FILE:LINE:COL: message" for malformed TOML.
  static ExperimentFile load(const std::string& path, const std::vector<std::string>& overrides = {});
  ~ExperimentFile();
  ExperimentFile(ExperimentFile&&) noexcept;
  ExperimentFile& operator=(ExperimentFile&&) noexcept;

  const std::string& path() const { return path_; }
  /// Variant names in the order the file declares them; {"default"} when it declares none.
  std::vector<std::string> variants() const;
  /// Resolves one variant: base tables, then the variant's overrides, then `--set` overrides,
  /// validated against host_schema() and the plugins' manifests. Throws htm::Error
  /// "FILE:LINE:COL: message" naming what was expected (known names for plugins).
  ResolvedConfig resolve(const std::string& variant, const PluginCatalog& catalog) const;

 private:
  /// The file merged over what it extends, and the --set overrides, each key's position kept
  /// (toml++ drops positions when it copies a node).
  struct Parsed;

  ExperimentFile() = default;
  std::string path_;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace htm
