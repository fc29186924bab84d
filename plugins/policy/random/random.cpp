// The uniform-random baseline policy (paper §4.3, §4.4): every allowed pair equally likely.
#include <torch/torch.h>

#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  return {"random",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Uniform-random merge and unmerge decisions: the paper's 'Random' baseline (§4.3-4.4)",
          {}};
}

class RandomPolicy : public htm::Policy {
 public:
  RandomPolicy(const htm::Params&, const htm::BuildContext&) {}

  // Equal logits: one pair at a time, uniform over the pairs whose tokens are both unused.
  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto [src, dst] = htm::sample_disjoint_pairs(merge_logits(ctx), ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, torch::Tensor()};
  }

  // The same uniform logits for every input: policy_variation and policy_structure are 0.
  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    return ctx.tokens.new_zeros({ctx.tokens.size(0), ctx.tokens.size(1), ctx.tokens.size(1)});
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return htm::uniform_unmerges(ctx); }
};

}  // namespace

HTM_REGISTER_PLUGIN(RandomPolicy, manifest)
