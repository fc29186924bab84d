// The learned policy's shape (paper §3.1.2-3.1.3), for policies that vary what its pair scores
// read: merge logits from a bilinear form (QKᵀ per head, heads mixed by learned weights) over
// normalised detached tokens, r disjoint pairs drawn from them, and unmerges chosen by a learned
// scoring MLP. A subclass registers whatever it adds first, then calls add_scorers() (the order
// of registration is the order of a checkpoint's parameters and of their initial draws), and
// overrides view() to give the scores its own view of the tokens. Header-only.
#pragma once

#include <string>

#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "htm/error.h"
#include "htm/layers.h"
#include "htm/policy.h"

namespace htm {

class BilinearPolicy : public Policy {
 public:
  MergeDecision choose_merges(const MergeContext& ctx) override {
    auto logits = logits_of(ctx.tokens);
    auto [src, dst] = sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            pair_entropy(logits, ctx.logit_bound)};
  }

  UnmergeDecision choose_unmerges(const UnmergeContext& ctx) override { return unmerge_->choose(ctx); }

  torch::Tensor merge_logits(const MergeContext& ctx) override { return logits_of(ctx.tokens); }

 protected:
  /// The width is the model's; `params` "heads" (0: the model's) must divide it.
  BilinearPolicy(const Params& params, const BuildContext& ctx)
      : dim_(ctx.dim), heads_(params.integer_or("heads", ctx.heads)) {
    if (dim_ % heads_ != 0)
      throw Error("heads (" + std::to_string(heads_) + ") must divide model.dim (" + std::to_string(dim_) + ")");
  }

  /// Registers the scoring parts: norm, query, key, head_weight, unmerge (`params` "score_hidden",
  /// the scoring MLP's width; 0: the model's).
  void add_scorers(const Params& params) {
    const int64_t hidden = params.integer_or("score_hidden", dim_);
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim_})));
    query_ = register_module("query", Linear(dim_, dim_));
    key_ = register_module("key", Linear(dim_, dim_));
    head_weight_ = register_parameter("head_weight", torch::full({heads_}, 1.0 / heads_));
    unmerge_ = register_module("unmerge", UnmergeScorer(dim_, hidden));
  }

  /// What the pair scores read, from the detached B×T×C tokens: the tokens themselves here.
  virtual torch::Tensor view(const torch::Tensor& detached) { return detached; }

  int64_t dim_, heads_;

 private:
  torch::Tensor logits_of(const torch::Tensor& tokens) {
    return bilinear_pair_logits(view(tokens.detach()), *norm_, query_, key_, head_weight_);
  }

  torch::nn::LayerNorm norm_{nullptr};
  Linear query_{nullptr}, key_{nullptr};
  torch::Tensor head_weight_;
  UnmergeScorer unmerge_{nullptr};
};

}  // namespace htm
