#include "config/search_path.h"

#include <cstdlib>
#include <sstream>

namespace htm {

std::vector<std::string> search_path(const char* variable, const std::vector<std::string>& fallbacks) {
  std::vector<std::string> path;
  if (const char* extra = std::getenv(variable)) {
    std::stringstream folders(extra);
    for (std::string folder; std::getline(folders, folder, ':');)
      if (!folder.empty()) path.push_back(folder);
  }
  path.insert(path.end(), fallbacks.begin(), fallbacks.end());
  return path;
}

}  // namespace htm
