#include "config/plugin_catalog.h"

#include "htm/error.h"

namespace htm {

PluginCatalog::~PluginCatalog() = default;
PluginFactory::~PluginFactory() = default;

void PluginFactory::wrong_interface(PluginKind kind, const std::string& name) {
  throw Error(std::string("plugin '") + name + "' says it is a " + kind_name(kind) +
              " plugin but its object does not implement that interface");
}

}  // namespace htm
