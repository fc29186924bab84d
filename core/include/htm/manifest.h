// What a plugin says about itself before anything of it runs.
#pragma once

#include <string>
#include <vector>

#include "htm/value.h"

namespace htm {

/// The SDK's binary interface version. Bump it whenever a header in core/include/htm changes
/// a class layout or a virtual signature; the registry refuses plugins built for another one.
constexpr int kSdkAbiVersion = 4;

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
