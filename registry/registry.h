// Plugin discovery and loading: finds htm_*.so files on a search path, checks each one's ABI
// handshake, reads its manifest, and creates objects that keep their library loaded.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/plugin_catalog.h"
#include "htm/manifest.h"
#include "htm/plugin.h"

namespace boost::dll {
class shared_library;
}

namespace htm {

/// One loaded plugin library.
struct PluginEntry {
  Manifest manifest;
  std::string path;
  std::shared_ptr<boost::dll::shared_library> library;
};

class Registry : public PluginFactory {
 public:
  /// HTM_PLUGIN_PATH (':'-separated) first, then the build's plugin folder, then the installed one.
  static std::vector<std::string> default_search_path();

  /// Scans every folder for htm_*.so. Libraries that fail the handshake are kept out and
  /// described in rejected(); a name already found earlier on the path shadows later ones.
  explicit Registry(const std::vector<std::string>& search_path = default_search_path());
  ~Registry() override;

  /// Loads one library file. Throws htm::Error with a sentence when it is not an htm plugin or
  /// was built for another SDK ABI.
  static PluginEntry load(const std::string& path);

  const std::vector<PluginEntry>& entries() const { return entries_; }
  const std::vector<std::string>& rejected() const { return rejected_; }
  /// Folders or files that could not be read (a symlink loop), and plugins shadowed by one of
  /// the same kind and name earlier on the path: one sentence each.
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::vector<std::string>& search_path() const { return search_path_; }

  const Manifest* find(PluginKind kind, const std::string& name) const override;
  std::vector<std::string> names(PluginKind kind) const override;
  std::string why_missing(PluginKind kind, const std::string& name) const override;
  const PluginEntry& entry(PluginKind kind, const std::string& name) const;
  /// Every declared parameter of a plugin at its default.
  Params default_params(PluginKind kind, const std::string& name) const;

  /// Builds plugin `name` of `kind`; the returned pointer's deleter holds the library, so the
  /// object can never outlive the code that implements it.
  std::shared_ptr<Plugin> build(PluginKind kind, const std::string& name, const Params& params,
                                const BuildContext& ctx) const override;

  /// "policy plugin 'nearest' 1.0.0 (/path/htm_policy_nearest.so)" for an object this registry
  /// built (its most-derived address, as PluginScope records it), else "a plugin".
  std::string describe(const void* object) const;
  /// The SHA-256 of a library file, computed once per path.
  std::string sha256(const std::string& path) const;

 private:
  std::vector<std::string> search_path_;
  std::vector<PluginEntry> entries_;
  std::vector<std::string> rejected_;
  std::vector<std::string> warnings_;
  struct Built {
    const void* object;
    PluginKind kind;
    std::string name;
  };
  mutable std::vector<Built> built_;
  mutable std::map<std::string, std::string> sha256_;
};

}  // namespace htm
