// The paper's learned policy (§3.1.2, §3.1.3): merge logits from a self-attention-like
// bilinear form on detached tokens, unmerge scores from an MLP on detached tokens.

#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"learned",
          htm::PluginKind::policy,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Learned merge policy (QK^T over detached tokens, heads mixed by learned weights) and "
          "learned unmerge scoring MLP; paper §3.1.2-3.1.3",
          {{"heads", ValueType::integer, int64_t{0}, "policy heads; 0 = the model's heads"},
           {"score_hidden", ValueType::integer, int64_t{0},
            "hidden width of the unmerge scoring MLP; 0 = the model's width"}}};
}

class LearnedPolicy : public htm::Policy {
 public:
  LearnedPolicy(const htm::Params& params, const htm::BuildContext& ctx)
      : dim_(ctx.dim), heads_(params.integer("heads") > 0 ? params.integer("heads") : ctx.heads) {
    if (dim_ % heads_ != 0)
      throw htm::Error("heads (" + std::to_string(heads_) + ") must divide model.dim (" + std::to_string(dim_) + ")");
    const int64_t hidden = params.integer("score_hidden") > 0 ? params.integer("score_hidden") : dim_;
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim_})));
    query_ = register_module("query", htm::Linear(dim_, dim_));
    key_ = register_module("key", htm::Linear(dim_, dim_));
    head_weight_ = register_parameter("head_weight", torch::full({heads_}, 1.0 / heads_));
    unmerge_ = register_module("unmerge", htm::UnmergeScorer(dim_, hidden));
  }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = logits_of(ctx.tokens);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, htm::pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            htm::pair_entropy(logits, ctx.logit_bound)};
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return unmerge_->choose(ctx); }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override { return logits_of(ctx.tokens); }

 private:
  torch::Tensor logits_of(const torch::Tensor& tokens) {
    return htm::bilinear_pair_logits(norm_->forward(tokens.detach()), query_, key_, head_weight_);
  }

  int64_t dim_, heads_;
  torch::nn::LayerNorm norm_{nullptr};
  htm::Linear query_{nullptr}, key_{nullptr};
  torch::Tensor head_weight_;
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(LearnedPolicy, manifest)
