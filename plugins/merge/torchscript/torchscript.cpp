// Merge and unmerge operators written in Python: a module scripted with torch.jit.script whose
// exported merge(src, dst) gives the parent of each pair and unmerge(tokens) its two children.
// Its parameters and buffers are this operator's own, under their Python names, as for the
// torchscript policy (plugins/policy/torchscript/scripted_module.h).
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/merge.h"
#include "scripted_module.h"

namespace {

using htm::scripted::is;
using htm::scripted::shape;

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

bool merge_signature(const std::vector<c10::Argument>& args, const std::vector<c10::Argument>& returns) {
  return args.size() == 2 && is(args[0].type(), c10::TypeKind::TensorType) &&
         is(args[1].type(), c10::TypeKind::TensorType) && returns.size() == 1 &&
         is(returns[0].type(), c10::TypeKind::TensorType);
}

bool unmerge_signature(const std::vector<c10::Argument>& args, const std::vector<c10::Argument>& returns) {
  if (args.size() != 1 || !is(args[0].type(), c10::TypeKind::TensorType) || returns.size() != 1) return false;
  const auto tuple = returns[0].type()->cast<c10::TupleType>();
  return tuple && tuple->elements().size() == 2 && is(tuple->elements()[0], c10::TypeKind::TensorType) &&
         is(tuple->elements()[1], c10::TypeKind::TensorType);
}

class TorchScriptMerge : public htm::MergeOperator {
 public:
  TorchScriptMerge(const htm::Params& params, const htm::BuildContext& ctx)
      : module_("torchscript", params.text("path")) {
    if (!module_.has_method("merge", kMerge, merge_signature))
      throw htm::Error(module_.where() + "the module has no " + kMerge + " (@torch.jit.export)");
    if (!module_.has_method("unmerge", kUnmerge, unmerge_signature))
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
