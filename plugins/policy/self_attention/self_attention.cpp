// The HTM slides' answer to "pairwise merging myopia" (actions not contextualised within their
// active token population ⇒ self attention): the learned policy's bilinear pair scores, computed
// from tokens that first attend to the whole population still being merged.

#include "htm/bilinear_policy.h"

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

class SelfAttentionPolicy : public htm::BilinearPolicy {
 public:
  SelfAttentionPolicy(const htm::Params& params, const htm::BuildContext& ctx) : BilinearPolicy(params, ctx) {
    const int64_t blocks = params.integer("blocks"), ratio = params.integer("mlp_ratio");
    if (blocks < 1 || blocks > 16) throw htm::Error("blocks must be in 1..16, not " + std::to_string(blocks));
    if (ratio < 1) throw htm::Error("mlp_ratio must be at least 1, not " + std::to_string(ratio));
    for (int64_t b = 0; b < blocks; ++b) {
      norms_.push_back(
          register_module("norm" + std::to_string(b), torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim_}))));
      attention_.push_back(register_module("attention" + std::to_string(b), htm::Attention(dim_, heads_, 0.0)));
      mlps_.push_back(register_module("mlp" + std::to_string(b), htm::ResidualMlp(dim_, ratio, 0.0)));
    }
    add_scorers(params);
  }

 private:
  // Pre-norm blocks over the detached tokens (each token sees every other one still active),
  // before the learned policy's bilinear pair scores.
  torch::Tensor view(const torch::Tensor& detached) override {
    auto x = detached;
    for (size_t b = 0; b < attention_.size(); ++b) {
      auto h = norms_[b]->forward(x);
      x = mlps_[b]->forward(x + attention_[b]->forward(h, h));
    }
    return x;
  }

  std::vector<torch::nn::LayerNorm> norms_;
  std::vector<htm::Attention> attention_;
  std::vector<htm::ResidualMlp> mlps_;
};

}  // namespace

HTM_REGISTER_PLUGIN(SelfAttentionPolicy, manifest)
