// The torchscript plugins (plugins/policy/torchscript, plugins/merge/torchscript) refuse each bad
// module with one line naming the file and what was expected; the modules are written by
// tests/python/bad_modules.py at build time (tests/python/policy.cmake) where python3-torch is
// installed. tests/python/policy_test.sh trains the good ones inside htm run.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "plugins_util.h"
#include "test_util.h"

namespace htm {
namespace {

const std::string kBad = std::string(HTM_TEST_MODULES) + "/bad/";

// The one line the plugin of `kind` refuses `file` with ("" when it is built).
std::string refusal(PluginKind kind, const std::string& file) {
  Params params = htm::testing::plugins().default_params(kind, "torchscript");
  params.set("path", file);
  BuildContext ctx;
  ctx.dim = 16;
  ctx.heads = 2;
  try {
    if (kind == PluginKind::policy)
      htm::testing::plugins().create<Policy>(kind, "torchscript", params, ctx);
    else
      htm::testing::plugins().create<MergeOperator>(kind, "torchscript", params, ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class TorchScriptRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kBad + "text.pt"))
      GTEST_SKIP() << "no bad modules in " << kBad << " (python3-torch absent at build time)";
  }
  // The refusal names the file, says `what`, and is one line.
  static void expect(PluginKind kind, const std::string& name, const std::string& what) {
    const std::string line = refusal(kind, kBad + name);
    EXPECT_NE(line.find("torchscript: " + kBad + name + ": "), std::string::npos) << line;
    EXPECT_NE(line.find(what), std::string::npos) << name << ": " << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
};

TEST_F(TorchScriptRefusals, FilesThatAreNotScriptedModules) {
  expect(PluginKind::policy, "missing.pt", "no such file");
  expect(PluginKind::policy, "text.pt", "not a TorchScript module");
  expect(PluginKind::policy, "state_dict.pt", "not a TorchScript module");
  expect(PluginKind::merge, "text.pt", "not a TorchScript module");
  expect(PluginKind::policy, "newer.pt",
         "saved by a newer torch than the libtorch htm links (" TORCH_VERSION
         "): Attempted to read a PyTorch file with version 99, but the maximum supported version for reading is");
  EXPECT_NE(refusal(PluginKind::policy, "").find("set `path`"), std::string::npos);
}

TEST_F(TorchScriptRefusals, MethodsWithAnotherSignatureOrOutput) {
  expect(PluginKind::policy, "signature.pt",
         "forward must be forward(self, tokens: Tensor, depth: int) -> Tensor; the module's is "
         "forward(__torch__.WrongSignature self, Tensor x) -> Tensor");
  expect(PluginKind::policy, "unmerge_signature.pt",
         "unmerge_scores must be unmerge_scores(self, tokens: Tensor, depth: int) -> Tensor");
  expect(PluginKind::policy, "shape.pt",
         "forward returned [1, 4] for tokens of shape [1, 4, 16]; expected the pair logits B x T x T = [1, 4, 4]");
  expect(PluginKind::policy, "width8.pt",
         "forward failed on tokens of shape [1, 4, 16]: RuntimeError: mat1 and mat2 shapes cannot be multiplied");
  expect(PluginKind::merge, "policy16.pt", "the module has no merge(self, src: Tensor, dst: Tensor) -> Tensor");
  expect(PluginKind::merge, "merge_only.pt",
         "the module has no unmerge(self, tokens: Tensor) -> Tuple[Tensor, Tensor]");
  expect(PluginKind::merge, "half_children.pt",
         "unmerge (first) returned [2, 8] for tokens of shape [2, 16]; expected the same shape");
  EXPECT_EQ(refusal(PluginKind::policy, kBad + "policy16.pt"), "");
}

}  // namespace
}  // namespace htm
