// Plugin discovery, the ABI handshake, and object lifetime against library lifetime.
#include <torch/torch.h>

#include "htm/merge.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

TEST(Registry, RefusesAPluginBuiltForAnotherAbiWithASentence) {
  try {
    Registry::load(std::string(HTM_TEST_PLUGIN_DIR) + "/htm_policy_bad_abi.so");
    FAIL() << "loaded a plugin built for ABI 999";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("was built for htm SDK ABI 999, but this htm uses ABI " + std::to_string(kSdkAbiVersion)));
  }
  Registry registry({HTM_TEST_PLUGIN_DIR});
  ASSERT_EQ(registry.rejected().size(), 1u);
  EXPECT_THAT(registry.rejected()[0], ::testing::HasSubstr("htm_policy_bad_abi.so"));
  EXPECT_NE(registry.find(PluginKind::loss, "throwing"), nullptr);  // the good fixture still loads
}

TEST(Registry, RefusesFilesThatAreNotPlugins) {
  EXPECT_THROW(Registry::load("/nonexistent/htm_x.so"), Error);
  try {
    Registry::load("/lib/x86_64-linux-gnu/libz.so.1");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("is not an htm plugin"));
  }
}

TEST(Registry, FindsBuiltinsAndNamesKnownOnesForUnknownNames) {
  Registry registry({HTM_PLUGIN_DIR});
  EXPECT_TRUE(registry.rejected().empty());
  for (auto [kind, name] : std::vector<std::pair<PluginKind, std::string>>{
           {PluginKind::policy, "learned"}, {PluginKind::merge, "mlp"}, {PluginKind::loss, "mse"},
           {PluginKind::adapter, "image"}, {PluginKind::dataset, "fashion_mnist"}, {PluginKind::dataset, "cifar10"}}) {
    const Manifest* m = registry.find(kind, name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->abi, kSdkAbiVersion);
    EXPECT_FALSE(m->description.empty());
  }
  try {
    registry.entry(PluginKind::policy, "learnd");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("unknown policy plugin 'learnd'; known: "));
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("learned"));
  }
}

TEST(Registry, ObjectsKeepTheirLibraryLoaded) {
  std::shared_ptr<MergeOperator> op;
  std::weak_ptr<boost::dll::shared_library> library;
  {
    Registry registry({HTM_PLUGIN_DIR});
    BuildContext ctx;
    ctx.dim = 8;
    const auto& entry = registry.entry(PluginKind::merge, "mlp");
    library = entry.library;
    const long before = entry.library.use_count();
    op = registry.create<MergeOperator>(PluginKind::merge, "mlp", registry.default_params(PluginKind::merge, "mlp"), ctx);
    EXPECT_EQ(entry.library.use_count(), before + 1);
  }
  // The registry is gone; the object's deleter still holds the library, so its code runs.
  ASSERT_FALSE(library.expired());
  auto merged = op->merge(torch::randn({2, 8}), torch::randn({2, 8}));
  EXPECT_EQ(merged.sizes(), (std::vector<int64_t>{2, 8}));
  op.reset();
  EXPECT_TRUE(library.expired());  // released with the last object
}

TEST(Registry, PluginPathEnvironmentComesFirst) {
  setenv("HTM_PLUGIN_PATH", "/a:/b", 1);
  auto path = Registry::default_search_path();
  unsetenv("HTM_PLUGIN_PATH");
  ASSERT_GE(path.size(), 3u);
  EXPECT_EQ(path[0], "/a");
  EXPECT_EQ(path[1], "/b");
  EXPECT_EQ(path[2], HTM_PLUGIN_DIR);
}

}  // namespace
}  // namespace htm
