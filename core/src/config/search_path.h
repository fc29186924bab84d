// Search paths that users extend through the environment (HTM_PLUGIN_PATH, HTM_EXPERIMENTS_PATH).
#pragma once

#include <string>
#include <vector>

namespace htm {

/// The folders of the ':'-separated environment `variable` (none when unset), then `fallbacks`.
std::vector<std::string> search_path(const char* variable, const std::vector<std::string>& fallbacks);

}  // namespace htm
