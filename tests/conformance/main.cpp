// htm-conformance [GTEST FLAGS] [--param NAME=VALUE]... [PLUGIN.so | FOLDER]...: the plugin conformance suite as a
// program. With no plugin named it checks every plugin htm finds (HTM_PLUGIN_PATH, the build's
// and the installed folders); `htm check-plugin` runs it on an out-of-tree library.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conformance.h"
#include "registry.h"

namespace htm::conformance {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> g_folders, g_files;

std::string canonical(const std::string& path) {
  std::error_code ignored;
  return fs::weakly_canonical(path, ignored).string();
}

}  // namespace

void set_targets(const std::vector<std::string>& targets) {
  for (const std::string& target : targets) {
    if (fs::is_directory(target)) {
      g_folders.push_back(target);
    } else {
      g_files.push_back(canonical(target));
      g_folders.push_back(fs::path(g_files.back()).parent_path().string());
    }
  }
}

std::vector<std::string> search_path() { return g_folders.empty() ? Registry::default_search_path() : g_folders; }

std::vector<std::pair<std::string, std::string>> g_params;
void set_params(const std::vector<std::pair<std::string, std::string>>& params) { g_params = params; }
const std::vector<std::pair<std::string, std::string>>& params() { return g_params; }

bool under_test(const std::string& path) {
  if (g_files.empty()) return true;
  const std::string mine = canonical(path);
  for (const std::string& file : g_files)
    if (file == mine) return true;
  return false;
}

}  // namespace htm::conformance

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<char*> gtest_args = {argv[0]};
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, std::string>> params;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--param" || arg.rfind("--param=", 0) == 0) {  // --param NAME=VALUE
      const std::string setting = arg == "--param" ? (i + 1 < argc ? argv[++i] : "") : arg.substr(8);
      const size_t eq = setting.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "error: --param expects NAME=VALUE, got '%s'\n", setting.c_str());
        return 2;
      }
      params.emplace_back(setting.substr(0, eq), setting.substr(eq + 1));
    } else if (arg.rfind("-", 0) == 0) {
      gtest_args.push_back(argv[i]);
    } else if (!fs::exists(arg)) {
      std::fprintf(stderr, "error: no plugin library or folder '%s'\n", arg.c_str());
      return 2;
    } else {
      targets.push_back(arg);
    }
  }
  if (!targets.empty()) {
    // A library the registry would refuse (another ABI, not an htm plugin) is said so plainly.
    for (const std::string& target : targets) {
      if (fs::is_directory(target)) continue;
      try {
        htm::Registry::load(target);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
      }
    }
  }
  htm::conformance::set_targets(targets);
  htm::conformance::set_params(params);
  int count = static_cast<int>(gtest_args.size());
  ::testing::InitGoogleTest(&count, gtest_args.data());
  return RUN_ALL_TESTS();
}
