// The base of every plugin and the macro that exports one from a shared library.
#pragma once

#include <cstdint>
#include <vector>

#include "htm/error.h"
#include "htm/manifest.h"
#include "htm/value.h"

namespace htm {

/// Model-wide facts a plugin may need when it is built.
struct BuildContext {
  int64_t dim = 256;      ///< C, the token width
  int64_t heads = 8;      ///< attention heads of the host's blocks
  int64_t mlp_ratio = 4;  ///< hidden width of token MLPs, as a multiple of C
  double dropout = 0.1;
  std::vector<int64_t> sample_shape;  ///< one input sample, e.g. {1, 28, 28}; empty for datasets
  int64_t num_classes = 0;            ///< classes of the dataset, 0 when it has none
  int64_t layers = 0;  ///< merging layers L (model.layers); 0 where the host does not say (before SDK 6.3)
};

/// Every plugin object derives from Plugin (and, when it learns, from torch::nn::Module).
/// The host deletes it through this virtual destructor while its library is still loaded.
class Plugin {
 public:
  virtual ~Plugin();
};

}  // namespace htm

#if defined(_WIN32)
#define HTM_PLUGIN_EXPORT __declspec(dllexport)
#else
#define HTM_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/// Exports plugin class `Class` (constructible from `(const htm::Params&, const htm::BuildContext&)`)
/// with the manifest returned by `manifest_fn()`. Use once per library, at namespace scope.
#define HTM_REGISTER_PLUGIN(Class, manifest_fn)                                                   \
  extern "C" HTM_PLUGIN_EXPORT int htm_plugin_abi_version() { return ::htm::kSdkAbiVersion; }     \
  extern "C" HTM_PLUGIN_EXPORT int htm_plugin_abi_minor() { return ::htm::kSdkAbiMinor; }         \
  extern "C" HTM_PLUGIN_EXPORT const ::htm::Manifest* htm_plugin_manifest() {                     \
    static const ::htm::Manifest htm_manifest_ = manifest_fn();                                   \
    return &htm_manifest_;                                                                        \
  }                                                                                               \
  extern "C" HTM_PLUGIN_EXPORT ::htm::Plugin* htm_plugin_create(const ::htm::Params& params,      \
                                                                const ::htm::BuildContext& ctx) { \
    return new Class(params, ctx);                                                                \
  }
