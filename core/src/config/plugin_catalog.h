// What the host needs from wherever plugins come from: their manifests, to check a config
// against, and their objects, to assemble a model. The registry implements both.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "htm/manifest.h"
#include "htm/plugin.h"

namespace htm {

/// Manifests by kind and name (the registry; tests use a fake).
class PluginCatalog {
 public:
  virtual ~PluginCatalog();
  /// The manifest of plugin `name` of `kind`, or nullptr when none is known.
  virtual const Manifest* find(PluginKind kind, const std::string& name) const = 0;
  /// Known names of a kind, sorted, for "expected one of" messages.
  virtual std::vector<std::string> names(PluginKind kind) const = 0;
  /// Why plugin `name` of `kind` is missing when a library that would have been it was
  /// refused (built for another ABI, truncated): a sentence, or empty.
  virtual std::string why_missing(PluginKind /*kind*/, const std::string& /*name*/) const { return ""; }
};

/// A catalog that also builds plugin objects.
class PluginFactory : public PluginCatalog {
 public:
  ~PluginFactory() override;
  /// Builds plugin `name` of `kind`. The pointer keeps the code implementing it loaded.
  virtual std::shared_ptr<Plugin> build(PluginKind kind, const std::string& name, const Params& params,
                                        const BuildContext& ctx) const = 0;

  /// build() as interface T; throws htm::Error when the object does not implement it.
  template <class T>
  std::shared_ptr<T> create(PluginKind kind, const std::string& name, const Params& params,
                            const BuildContext& ctx) const {
    std::shared_ptr<T> typed = std::dynamic_pointer_cast<T>(build(kind, name, params, ctx));
    if (!typed) wrong_interface(kind, name);
    return typed;
  }

 private:
  [[noreturn]] static void wrong_interface(PluginKind kind, const std::string& name);
};

}  // namespace htm
