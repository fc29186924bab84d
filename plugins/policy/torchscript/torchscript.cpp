// A merge policy written in Python: a module scripted with torch.jit.script and saved with
// torch.jit.save, whose forward(tokens, depth) gives the B×T×T pair logits (and, optionally,
// unmerge_scores(tokens, depth) the B×T unmerge scores). The scripted module's parameters and
// buffers are registered as this policy's own, under their Python names (scripted_module.h), so
// the optimiser, checkpoints and resume, runtime.device, the data-parallel reducer and the memory
// estimate see them as any plugin's; sampling, exact log-probabilities and entropy stay in the
// SDK and draw from the run's generator.
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/layers.h"
#include "htm/policy.h"
#include "scripted_module.h"

namespace {

using htm::scripted::shape;
using Kind = c10::TypeKind;

constexpr const char* kForward = "forward(self, tokens: Tensor, depth: int) -> Tensor";
constexpr const char* kUnmerge = "unmerge_scores(self, tokens: Tensor, depth: int) -> Tensor";

htm::Manifest manifest() {
  using htm::ValueType;
  return {"torchscript",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "A merge policy written in PyTorch: a torch.jit.script module (file `path`) whose forward(tokens, depth) "
          "gives the B x T x T pair logits; sampling, log-probabilities and entropy stay in C++",
          {{"path", ValueType::string, std::string(),
            "the module saved by torch.jit.script(m).save(path) (docs/examples/python_policy/)"},
           {"score_hidden", ValueType::integer, int64_t{0},
            "hidden width of the C++ unmerge scoring MLP, used when the module has no unmerge_scores; 0 = the "
            "model's width"}}};
}

class TorchScriptPolicy : public htm::Policy {
 public:
  TorchScriptPolicy(const htm::Params& params, const htm::BuildContext& ctx)
      : module_("torchscript", params.text("path")) {
    if (!module_.has_method("forward", kForward, {Kind::TensorType, Kind::IntType}, {Kind::TensorType}))
      throw htm::Error(module_.where() + "the module has no " + kForward);
    scores_unmerges_ =
        module_.has_method("unmerge_scores", kUnmerge, {Kind::TensorType, Kind::IntType}, {Kind::TensorType});
    module_.adopt(*this);
    if (!scores_unmerges_) {
      if (module_.hasattr("unmerge"))
        throw htm::Error(module_.where() +
                         "the module has an attribute `unmerge` but no unmerge_scores; htm's unmerge scorer needs "
                         "that name (rename it, or define " +
                         kUnmerge + ")");
      const int64_t hidden = params.integer_or("score_hidden", ctx.dim);
      unmerge_ = register_module("unmerge", htm::UnmergeScorer(ctx.dim, hidden));
    }
    // A dry run on zeros, so a module built for another width fails here with one line, not
    // inside the first training step.
    torch::NoGradGuard no_grad;
    const int64_t dim = ctx.dim > 0 ? ctx.dim : 1;
    logits_of(torch::zeros({1, 4, dim}), 1);
    if (scores_unmerges_) unmerge_scores_of(torch::zeros({1, 4, dim}), 1);
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, htm::pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            htm::pair_entropy(logits, ctx.logit_bound)};
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override {
    if (!scores_unmerges_) return unmerge_->choose(ctx);
    auto scores = unmerge_scores_of(ctx.tokens.detach(), ctx.depth);
    // Teacher forcing: the true tokens' log-probabilities under the softmax over all T, as
    // htm::UnmergeScorer gives them.
    if (ctx.forced.defined()) return {ctx.forced, torch::log_softmax(scores, 1).gather(1, ctx.forced)};
    auto index = htm::sample_without_replacement(scores, ctx.r, ctx.generator);
    return {index, htm::token_log_prob(scores, index, ctx.log_prob_form)};
  }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    return logits_of(ctx.tokens.detach(), ctx.depth);
  }

 private:
  // The method's output for B×T×C tokens when it has the `expected` sizes, else one line saying
  // what came back.
  torch::Tensor scores_of(const std::string& method, const torch::Tensor& tokens, int64_t depth,
                          const std::vector<int64_t>& expected, const std::string& what) {
    auto out = module_.call(method, {tokens, depth}, "tokens of shape " + shape(tokens)).toTensor();
    if (out.sizes() != expected)
      throw htm::Error(module_.where() + method + " returned " + shape(out) + " for tokens of shape " + shape(tokens) +
                       "; expected " + what + " = " + c10::str(c10::IntArrayRef(expected)));
    return out;
  }
  torch::Tensor logits_of(const torch::Tensor& tokens, int64_t depth) {
    const int64_t B = tokens.size(0), T = tokens.size(1);
    return scores_of("forward", tokens, depth, {B, T, T}, "the pair logits B x T x T");
  }
  torch::Tensor unmerge_scores_of(const torch::Tensor& tokens, int64_t depth) {
    return scores_of("unmerge_scores", tokens, depth, {tokens.size(0), tokens.size(1)}, "B x T");
  }

  htm::scripted::Module module_;
  bool scores_unmerges_ = false;
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(TorchScriptPolicy, manifest)
