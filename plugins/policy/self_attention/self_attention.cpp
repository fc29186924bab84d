// The HTM slides' answer to "pairwise merging myopia" (actions not contextualised within their
// active token population ⇒ self attention): the learned policy's bilinear pair scores, computed
// from tokens that first attend to the whole population still being merged.

#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {
      "self_attention",
      htm::PluginKind::policy,
      "1.0.0",
      htm::kSdkAbiVersion,
      "Learned merge policy whose pair scores (QK^T, as `learned`) come after its own self-attention "
      "blocks over the active tokens (the HTM slides' remedy for pairwise merging myopia); learned "
      "unmerge scoring MLP",
      {{"heads", ValueType::integer, int64_t{0}, "attention and scoring heads; 0 = the model's heads"},
       {"blocks", ValueType::integer, int64_t{1}, "self-attention blocks (attention + MLP, pre-norm) before scoring"},
       {"mlp_ratio", ValueType::integer, int64_t{2}, "hidden width of each block's MLP, in multiples of model.dim"},
       {"score_hidden", ValueType::integer, int64_t{0},
        "hidden width of the unmerge scoring MLP; 0 = the model's width"}}};
}

class SelfAttentionPolicy : public htm::Policy {
 public:
  SelfAttentionPolicy(const htm::Params& params, const htm::BuildContext& ctx)
      : dim_(ctx.dim), heads_(params.integer("heads") > 0 ? params.integer("heads") : ctx.heads) {
    if (dim_ % heads_ != 0)
      throw htm::Error("heads (" + std::to_string(heads_) + ") must divide model.dim (" + std::to_string(dim_) + ")");
    const int64_t blocks = params.integer("blocks"), ratio = params.integer("mlp_ratio");
    if (blocks < 1 || blocks > 16) throw htm::Error("blocks must be in 1..16, not " + std::to_string(blocks));
    if (ratio < 1) throw htm::Error("mlp_ratio must be at least 1, not " + std::to_string(ratio));
    for (int64_t b = 0; b < blocks; ++b) {
      norms_.push_back(
          register_module("norm" + std::to_string(b), torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim_}))));
      attention_.push_back(register_module("attention" + std::to_string(b), htm::Attention(dim_, heads_, 0.0)));
      mlps_.push_back(register_module("mlp" + std::to_string(b), htm::ResidualMlp(dim_, ratio, 0.0)));
    }
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim_})));
    query_ = register_module("query", htm::Linear(dim_, dim_));
    key_ = register_module("key", htm::Linear(dim_, dim_));
    head_weight_ = register_parameter("head_weight", torch::full({heads_}, 1.0 / heads_));
    const int64_t hidden = params.integer("score_hidden") > 0 ? params.integer("score_hidden") : dim_;
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
  // Pre-norm blocks over the detached tokens (each token sees every other one still active),
  // then the learned policy's bilinear pair scores.
  torch::Tensor logits_of(const torch::Tensor& tokens) {
    auto x = tokens.detach();
    for (size_t b = 0; b < attention_.size(); ++b) {
      auto h = norms_[b]->forward(x);
      x = mlps_[b]->forward(x + attention_[b]->forward(h, h));
    }
    return htm::bilinear_pair_logits(norm_->forward(x), query_, key_, head_weight_);
  }

  int64_t dim_, heads_;
  std::vector<torch::nn::LayerNorm> norms_;
  std::vector<htm::Attention> attention_;
  std::vector<htm::ResidualMlp> mlps_;
  torch::nn::LayerNorm norm_{nullptr};
  htm::Linear query_{nullptr}, key_{nullptr};
  torch::Tensor head_weight_;
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(SelfAttentionPolicy, manifest)
