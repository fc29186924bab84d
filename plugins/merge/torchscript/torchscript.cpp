// Merge and unmerge operators written in Python: a module scripted with torch.jit.script whose
// exported merge(src, dst) gives the parent of each pair and unmerge(tokens) its two children.
// Its parameters and buffers are this operator's own, under their Python names, as for the
// torchscript policy (plugins/policy/torchscript/scripted_module.h).
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/merge.h"
#include "scripted_module.h"

namespace {

using htm::scripted::shape;
using Kind = c10::TypeKind;

constexpr const char* kMerge = "merge(self, src: Tensor, dst: Tensor) -> Tensor";
constexpr const char* kUnmerge = "unmerge(self, tokens: Tensor) -> Tuple[Tensor, Tensor]";

htm::Manifest manifest() {
  return {"torchscript",
          htm::PluginKind::merge,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Merge and unmerge operators written in PyTorch: a torch.jit.script module (file `path`) with "
          "merge(src, dst) -> parent and unmerge(tokens) -> (first, second)",
          {{"path", htm::ValueType::string, std::string(),
            "the module saved by torch.jit.script(m).save(path) (docs/examples/python_policy/mlp_merge.py)"}}};
}

class TorchScriptMerge : public htm::MergeOperator {
 public:
  TorchScriptMerge(const htm::Params& params, const htm::BuildContext& ctx)
      : module_("torchscript", params.text("path")) {
    if (!module_.has_method("merge", kMerge, {Kind::TensorType, Kind::TensorType}, {Kind::TensorType}))
      throw htm::Error(module_.where() + "the module has no " + kMerge + " (@torch.jit.export)");
    if (!module_.has_method("unmerge", kUnmerge, {Kind::TensorType}, {Kind::TensorType, Kind::TensorType}))
      throw htm::Error(module_.where() + "the module has no " + kUnmerge + " (@torch.jit.export)");
    module_.adopt(*this);
    // A dry run on zeros: a module built for another width fails here with one line.
    torch::NoGradGuard no_grad;
    const auto tokens = torch::zeros({2, ctx.dim > 0 ? ctx.dim : 1});
    const auto parent = merge(tokens, tokens);
    const auto children = unmerge(tokens);
    for (const auto& [what, out] : {std::pair<const char*, torch::Tensor>{"merge", parent},
                                    {"unmerge (first)", children.first},
                                    {"unmerge (second)", children.second}})
      if (!out.sizes().equals(tokens.sizes()))
        throw htm::Error(module_.where() + what + " returned " + shape(out) + " for tokens of shape " + shape(tokens) +
                         "; expected the same shape");
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  torch::Tensor merge(const torch::Tensor& src, const torch::Tensor& dst) override {
    return module_.call("merge", {src, dst}, "src and dst of shape " + shape(src)).toTensor();
  }

  std::pair<torch::Tensor, torch::Tensor> unmerge(const torch::Tensor& tokens) override {
    const auto out = module_.call("unmerge", {tokens}, "tokens of shape " + shape(tokens)).toTuple();
    return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
  }

 private:
  htm::scripted::Module module_;
};

}  // namespace

HTM_REGISTER_PLUGIN(TorchScriptMerge, manifest)
