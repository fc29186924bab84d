// Plugin kinds by name (htm/manifest.h).
#include "htm/manifest.h"

namespace htm {

const char* kind_name(PluginKind kind) {
  switch (kind) {
    case PluginKind::policy:
      return "policy";
    case PluginKind::merge:
      return "merge";
    case PluginKind::loss:
      return "loss";
    case PluginKind::adapter:
      return "adapter";
    case PluginKind::dataset:
      return "dataset";
  }
  return "unknown";
}

bool parse_kind(const std::string& text, PluginKind* kind) {
  for (PluginKind candidate :
       {PluginKind::policy, PluginKind::merge, PluginKind::loss, PluginKind::adapter, PluginKind::dataset}) {
    if (text == kind_name(candidate)) {
      *kind = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace htm
