// Every folder under plugins/ is a plugin that is built, found by the registry and documented.
#include <filesystem>

#include <gtest/gtest.h>

#include "registry.h"

namespace htm {
namespace {

TEST(PluginTree, EveryPluginFolderIsBuiltListedAndDocumented) {
  namespace fs = std::filesystem;
  const Registry registry({HTM_PLUGIN_DIR});
  int folders = 0;
  for (const auto& kind_dir : fs::directory_iterator(fs::path(HTM_SOURCE_DIR) / "plugins")) {
    if (!kind_dir.is_directory()) continue;
    PluginKind kind;
    ASSERT_TRUE(parse_kind(kind_dir.path().filename().string(), &kind)) << kind_dir.path();
    for (const auto& dir : fs::directory_iterator(kind_dir.path())) {
      const std::string name = dir.path().filename().string();
      ++folders;
      EXPECT_TRUE(fs::exists(dir.path() / "README.md")) << dir.path() << " has no README.md";
      EXPECT_NE(registry.find(kind, name), nullptr) << dir.path() << " is not a registered plugin";
    }
  }
  EXPECT_EQ(folders, static_cast<int>(registry.entries().size()));
}

}  // namespace
}  // namespace htm
