// Plugin discovery, the ABI handshake, and object lifetime against library lifetime.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <torch/torch.h>

#include "file_checks.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

TEST(Registry, RefusesAPluginBuiltForAnotherAbiWithASentence) {
  try {
    Registry::load(std::string(HTM_TEST_PLUGIN_DIR) + "/htm_policy_bad_abi.so");
    FAIL() << "loaded a plugin built for ABI 999";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("was built for htm SDK ABI 999, but this htm uses ABI " +
                                                            std::to_string(kSdkAbiVersion)));
  }
  Registry registry({HTM_TEST_PLUGIN_DIR});
  ASSERT_EQ(registry.rejected().size(), 3u);  // bad_abi's handshake, bad_manifest's manifest, newer_minor
  EXPECT_THAT(registry.rejected()[0], ::testing::HasSubstr("htm_policy_bad_abi.so"));
  EXPECT_THAT(registry.rejected()[1],
              ::testing::HasSubstr("htm_policy_bad_manifest.so' declares SDK ABI 2 in its manifest"));
  EXPECT_THAT(registry.rejected()[2], ::testing::HasSubstr("htm_policy_newer_minor.so"));
  EXPECT_NE(registry.find(PluginKind::loss, "throwing"), nullptr);  // the good fixture still loads
}

// A plugin built on newer headers of the same major passes a major-only handshake and would then
// die on an unresolved symbol at its first call: the minor version refuses it up front instead.
TEST(Registry, RefusesAPluginBuiltOnNewerHeadersNamingBothVersions) {
  const std::string ours = std::to_string(kSdkAbiVersion) + "." + std::to_string(kSdkAbiMinor);
  const std::string theirs = std::to_string(kSdkAbiVersion) + "." + std::to_string(kSdkAbiMinor + 1);
  try {
    Registry::load(std::string(HTM_TEST_PLUGIN_DIR) + "/htm_policy_newer_minor.so");
    FAIL() << "loaded a plugin built on newer SDK headers";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()),
                ::testing::HasSubstr("was built on htm SDK " + theirs + " headers, newer than this htm's SDK " + ours));
  }
  Registry registry({HTM_TEST_PLUGIN_DIR});
  EXPECT_EQ(registry.find(PluginKind::policy, "newer_minor"), nullptr);
  try {
    registry.entry(PluginKind::policy, "newer_minor");
    FAIL();
  } catch (const Error& e) {  // asked for by name, the refusal is given again
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("was found but not loaded"));
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("newer than this htm's SDK " + ours));
  }
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
  for (auto [kind, name] : std::vector<std::pair<PluginKind, std::string>>{{PluginKind::policy, "learned"},
                                                                           {PluginKind::merge, "mlp"},
                                                                           {PluginKind::loss, "mse"},
                                                                           {PluginKind::adapter, "image"},
                                                                           {PluginKind::dataset, "fashion_mnist"},
                                                                           {PluginKind::dataset, "cifar10"}}) {
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

// merge_logits is optional for a plugin (htm/policy.h), but every policy shipped here gives it:
// policy_variation, policy_structure and the Figure 4 heatmap are measured on every study's
// policies, the references included.
TEST(Registry, EveryShippedPolicyGivesItsMergeLogits) {
  Registry registry({HTM_PLUGIN_DIR});
  BuildContext ctx;
  ctx.dim = 16;
  ctx.heads = 2;
  ctx.mlp_ratio = 2;
  const std::vector<std::string> names = registry.names(PluginKind::policy);
  ASSERT_GE(names.size(), 8u);
  for (const std::string& name : names) {
    Params params = registry.default_params(PluginKind::policy, name);
    if (name == "torchscript") {  // the module the build scripted for the conformance suite (width 16)
      const std::string module = std::string(HTM_TEST_MODULES) + "/policy.pt";
      if (!std::filesystem::exists(module)) continue;  // no python3-torch: the conformance suite says so
      params.set("path", module);
    }
    auto policy = registry.create<Policy>(PluginKind::policy, name, params, ctx);
    MergeContext m;
    m.tokens = torch::randn({2, 8, 16});
    m.r = 3;
    m.attention = torch::softmax(torch::randn({2, 8, 8}), -1);
    m.cross_keys = torch::randn({2, 8, 16});
    m.siblings = torch::zeros({2, 8, 8});
    m.generator = at::make_generator<at::CPUGeneratorImpl>(0);
    torch::Tensor logits = policy->merge_logits(m);
    ASSERT_TRUE(logits.defined()) << name << " gives no merge_logits";
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 8, 8})) << name;
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
    op = registry.create<MergeOperator>(PluginKind::merge, "mlp", registry.default_params(PluginKind::merge, "mlp"),
                                        ctx);
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

// A scratch plugin folder holding copies and damaged copies of real plugins.
std::string plugin_folder(const std::string& name) {
  const std::string dir = htm::testing::fresh_dir(name);
  return dir;
}

void copy_bytes(const std::string& from, const std::string& to, int64_t keep = -1) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (keep >= 0) bytes.resize(static_cast<size_t>(keep));
  std::ofstream(to, std::ios::binary) << bytes;
}

TEST(Registry, SurvivesTruncatedAndGarbageLibrariesAndSymlinkLoops) {
  const std::string dir = plugin_folder("damaged");
  const std::string good = std::string(HTM_PLUGIN_DIR) + "/htm_policy_random.so";
  copy_bytes(good, dir + "/htm_policy_truncated.so", static_cast<int64_t>(std::filesystem::file_size(good) / 2));
  std::ofstream(dir + "/htm_policy_garbage.so") << "this is not a shared library at all, just some bytes";
  std::ofstream(dir + "/htm_policy_empty.so");
  std::filesystem::create_symlink(dir + "/htm_loss_loop_b.so", dir + "/htm_loss_loop_a.so");
  std::filesystem::create_symlink(dir + "/htm_loss_loop_a.so", dir + "/htm_loss_loop_b.so");
  std::filesystem::create_directory_symlink(dir + "/folder_loop", dir + "/folder_loop");
  copy_bytes(good, dir + "/htm_policy_random.so");

  Registry registry({dir, dir + "/folder_loop", HTM_PLUGIN_DIR});
  EXPECT_NE(registry.find(PluginKind::policy, "random"), nullptr);  // the intact copy loads
  std::string rejected;
  for (const auto& r : registry.rejected()) rejected += r + "\n";
  EXPECT_THAT(rejected, ::testing::HasSubstr("htm_policy_truncated.so': it is truncated: the file has"));
  EXPECT_THAT(rejected,
              ::testing::HasSubstr("htm_policy_garbage.so': it is not a shared library (invalid ELF header)"));
  EXPECT_THAT(rejected, ::testing::HasSubstr("htm_policy_empty.so': it is not a shared library"));
  std::string warnings;
  for (const auto& w : registry.warnings()) warnings += w + "\n";
  EXPECT_THAT(warnings, ::testing::HasSubstr("htm_loss_loop_a.so' skipped: Too many levels of symbolic links"));
  EXPECT_THAT(warnings, ::testing::HasSubstr("folder_loop' skipped"));
  // The copy earlier on the path shadows the built-in, and that is said.
  EXPECT_THAT(warnings, ::testing::HasSubstr("policy plugin 'random' in '" + dir +
                                             "/htm_policy_random.so' shadows the one in '"));
  EXPECT_EQ(registry.entry(PluginKind::policy, "random").path, dir + "/htm_policy_random.so");
}

TEST(Registry, APluginRefusedForItsAbiIsNamedWhenAskedFor) {
  Registry registry({HTM_TEST_PLUGIN_DIR, HTM_PLUGIN_DIR});
  const std::string message = htm::testing::error_of([&] { registry.entry(PluginKind::policy, "bad_abi"); });
  EXPECT_THAT(message, ::testing::HasSubstr("policy plugin 'bad_abi' was found but not loaded: "));
  EXPECT_THAT(message, ::testing::HasSubstr("built for htm SDK ABI 999"));
  EXPECT_THAT(registry.why_missing(PluginKind::policy, "bad_abi"), ::testing::HasSubstr("ABI 999"));
  EXPECT_EQ(registry.why_missing(PluginKind::policy, "learned"), "");
}

TEST(Registry, Sha256MatchesThePublishedVectorsAndFingerprintsFiles) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  const std::string dir = plugin_folder("sha");
  std::ofstream(dir + "/f", std::ios::binary) << "abc";
  EXPECT_EQ(sha256_file(dir + "/f"), sha256_hex("abc"));
  EXPECT_EQ(elf_problem(std::string(HTM_PLUGIN_DIR) + "/htm_policy_random.so"), "");
}

}  // namespace
}  // namespace htm
