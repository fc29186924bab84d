// The heuristic policy (paper §4.3): the encoder transformer block's attention weights are the
// merge policy — tokens that attend strongly to each other merge.
#include <torch/torch.h>

#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  return {"heuristic",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Merge policy = the encoder transformer block's attention (heads averaged); uniform "
          "unmerging; paper §4.3",
          {{"temperature", htm::ValueType::floating, 1.0,
            "policy ∝ attention^(1/temperature); 1 samples the attention weights as they are"}}};
}

class HeuristicPolicy : public htm::Policy {
 public:
  HeuristicPolicy(const htm::Params& params, const htm::BuildContext&) : temperature_(params.number("temperature")) {
    if (!(temperature_ > 0)) throw htm::Error("temperature must be positive");
  }

  bool needs_attention() const override { return true; }

  // Pair (i, j) is drawn with probability ∝ a_ij, the attention of token i to token j: the
  // softmax of log a_ij over the off-diagonal entries, one pair at a time. Nothing here is
  // learned by the estimator, so no log-probability is returned.
  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, torch::Tensor()};
  }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    if (!ctx.attention.defined())
      throw htm::Error("the heuristic policy needs the encoder's transformer block (model.transformer = true)");
    return ctx.attention.detach().clamp_min(1e-30).log() / temperature_;
  }

  // The paper is silent on unmerging for this variant (and under maximal compression every
  // token unmerges anyway); the decoder's attention comes only after unmerging, so it is uniform.
  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return htm::uniform_unmerges(ctx); }

 private:
  double temperature_;
};

}  // namespace

HTM_REGISTER_PLUGIN(HeuristicPolicy, manifest)
