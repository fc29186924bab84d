// A learned symmetric bilinear merge policy: pair logits x_iᵀ W x_j with W = (A + Aᵀ)/2 over the
// raw detached tokens, no normalisation and no query/key split, so it can represent a score that
// pairs tokens related by any fixed symmetric map (issue 63's hidden pairs: W = R) as well as
// similarity (W = I); learned unmerge scoring MLP as the paper's policy (§3.1.3).
#include <cmath>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/layers.h"
#include "htm/policy.h"
#include "htm/sets.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"bilinear",
          htm::PluginKind::policy,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Learned symmetric bilinear merge policy: logits x_i^T W x_j, W = (A + A^T)/2 on the raw detached "
          "tokens (no LayerNorm, one head); learned unmerge scoring MLP (paper §3.1.3)",
          {{"init_std", ValueType::floating, 0.01,
            "standard deviation of A's entries at the start (0: a uniform policy at first)"},
           {"levels", ValueType::integer, int64_t{1},
            "weights of their own for the first levels: encoder layer d scores with W_min(d, levels) (1: one W for "
            "every layer)"},
           {"score_hidden", ValueType::integer, int64_t{0},
            "hidden width of the unmerge scoring MLP; 0 = the model's width"}}};
}

class SymmetricBilinearPolicy : public htm::Policy {
 public:
  SymmetricBilinearPolicy(const htm::Params& params, const htm::BuildContext& ctx) {
    const double init_std = params.number("init_std");
    if (!(init_std >= 0) || std::isinf(init_std))
      throw htm::Error("bilinear: init_std must be a finite number, 0 or more, got " + std::to_string(init_std));
    const int64_t levels = params.integer("levels");
    if (levels < 1) throw htm::Error("bilinear: levels must be at least 1, got " + std::to_string(levels));
    if (ctx.layers > 0 && levels > ctx.layers)  // a weight a level: more than the layers would never be read
      throw htm::Error("bilinear: levels is " + std::to_string(levels) + ", more than the model's " +
                       std::to_string(ctx.layers) +
                       " merging layers (model.layers): layer d scores with W_min(d, levels)");
    for (int64_t l = 1; l <= levels; ++l)  // "weight" the first (as before levels), then weight_2, ...
      weights_.push_back(register_parameter(l == 1 ? std::string("weight") : "weight_" + std::to_string(l),
                                            torch::randn({ctx.dim, ctx.dim}) * init_std));
    const int64_t hidden = params.integer_or("score_hidden", ctx.dim);
    unmerge_ = register_module("unmerge", htm::UnmergeScorer(ctx.dim, hidden));
  }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, htm::pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            htm::pair_entropy(logits, ctx.logit_bound)};
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return unmerge_->choose(ctx); }

  // B×T×T: x W xᵀ with the symmetric part of the layer's weight, on the detached tokens.
  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    auto x = ctx.tokens.detach();
    const auto& weight = weights_[std::min<size_t>(std::max<int64_t>(ctx.depth, 1), weights_.size()) - 1];
    auto w = 0.5 * (weight + weight.t());
    return torch::matmul(torch::matmul(x, w), x.transpose(1, 2));
  }

 private:
  std::vector<torch::Tensor> weights_;
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(SymmetricBilinearPolicy, manifest)
