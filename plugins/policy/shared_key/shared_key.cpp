// Appendix A.3's alternate merging block: the policy reuses the cross-attention's keys,
// detached, so the estimator trains only the policy's queries (and head weights).
#include <cmath>

#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  return {"shared_key",
          htm::PluginKind::policy,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Merge logits Q·sg[K]ᵀ/√d with K the merging block's cross-attention keys, heads mixed "
          "by learned weights; learned unmerge scoring MLP; paper A.3",
          {{"score_hidden", htm::ValueType::integer, int64_t{0},
            "hidden width of the unmerge scoring MLP; 0 = the model's width"}}};
}

class SharedKeyPolicy : public htm::Policy {
 public:
  SharedKeyPolicy(const htm::Params& params, const htm::BuildContext& ctx) : dim_(ctx.dim), heads_(ctx.heads) {
    const int64_t hidden = params.integer_or("score_hidden", dim_);
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim_})));
    query_ = register_module("query", htm::Linear(dim_, dim_));
    head_weight_ = register_parameter("head_weight", torch::full({heads_}, 1.0 / heads_));
    unmerge_ = register_module("unmerge", htm::UnmergeScorer(dim_, hidden));
  }

  bool needs_cross_keys() const override { return true; }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, htm::pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            htm::pair_entropy(logits, ctx.logit_bound)};
  }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    if (!ctx.cross_keys.defined())
      throw htm::Error(
          "the shared_key policy needs the merging block's cross-attention (model.cross_attention = true)");
    const int64_t B = ctx.tokens.size(0), T = ctx.tokens.size(1), d = dim_ / heads_;
    // The keys are the cross-attention's (one head per d-slice, as it splits them), detached:
    // they are trained only through the cross-attention, the queries only by the estimator.
    auto q = query_->forward(norm_->forward(ctx.tokens.detach())).view({B, T, heads_, d}) *
             head_weight_.view({1, 1, heads_, 1});
    return torch::bmm(q.view({B, T, dim_}), ctx.cross_keys.detach().transpose(1, 2)) /
           std::sqrt(static_cast<double>(d));
  }

  // A.3 changes only the merging block; unmerging keeps the original's learned scoring MLP.
  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return unmerge_->choose(ctx); }

 private:
  int64_t dim_, heads_;
  torch::nn::LayerNorm norm_{nullptr};
  htm::Linear query_{nullptr};
  torch::Tensor head_weight_;
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(SharedKeyPolicy, manifest)
