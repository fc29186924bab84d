// Mixture-of-experts merge and unmerge operators (paper appendix A.4, second variant): several
// merge/unmerge MLP pairs; a learned scoring function routes each pair (and each token to split)
// to one expert, whose output is scaled by the routing probability — the sparsely-gated MoE's
// biased gradient for the discrete choice (Shazeer et al. 2017, the paper's [44]).
#include <cmath>

#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/merge.h"
#include "htm/row_shard.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"moe",
          htm::PluginKind::merge,
          "2.0.0",
          htm::kSdkAbiVersion,
          "Mixture of merge/unmerge experts, each pair routed top-1 by a learned score and scaled by "
          "its routing probability; paper appendix A.4 (second variant)",
          {{"experts", ValueType::integer, int64_t{4}, "merge/unmerge expert pairs"},
           {"hidden_ratio", ValueType::integer, int64_t{4},
            "each expert's hidden width as a multiple of the model's width C"},
           {"router_noise", ValueType::floating, 1.0,
            "sd of Gaussian noise on the routing scores while training (noisy gating); 0: none"},
           {"residual", ValueType::boolean, true,
            "the routed expert output is added to (src + dst)/2, or to the parent when unmerging; "
            "experts read LayerNorm'd input and start at zero (as mlp's residual; false: the paper's)"}}};
}

class MoeMerge : public htm::MergeOperator {
 public:
  MoeMerge(const htm::Params& params, const htm::BuildContext& ctx)
      : router_noise_(params.number("router_noise")), residual_(params.flag("residual")) {
    if (!(router_noise_ >= 0) || std::isinf(router_noise_))  // NaN too: noise of no size routes by nothing
      throw htm::Error("moe: router_noise must be a finite number, 0 or more, got " + std::to_string(router_noise_));
    const int64_t c = ctx.dim, hidden = params.integer("hidden_ratio") * ctx.dim;
    const int64_t experts = params.integer("experts");
    if (hidden <= 0) throw htm::Error("hidden_ratio must be positive");
    if (experts < 1) throw htm::Error("experts must be at least 1");
    merge_router_ = register_module("merge_router", htm::Linear(2 * c, experts));
    unmerge_router_ = register_module("unmerge_router", htm::Linear(c, experts));
    for (int64_t e = 0; e < experts; ++e) {
      merge_.push_back(register_module("merge" + std::to_string(e), htm::TokenMlp(2 * c, hidden, c, residual_)));
      unmerge_.push_back(register_module("unmerge" + std::to_string(e), htm::TokenMlp(c, hidden, 2 * c, residual_)));
    }
  }

  torch::Tensor merge(const torch::Tensor& src, const torch::Tensor& dst) override {
    auto x = torch::cat({src, dst}, -1);
    auto merged = route(x, merge_router_, merge_, src.size(1));
    return residual_ ? 0.5 * (src + dst) + merged : merged;
  }

  std::pair<torch::Tensor, torch::Tensor> unmerge(const torch::Tensor& tokens) override {
    auto halves = route(tokens, unmerge_router_, unmerge_, 2 * tokens.size(1)).chunk(2, -1);
    if (residual_) return {tokens + halves[0], tokens + halves[1]};
    return {halves[0], halves[1]};
  }

 private:
  // Top-1 routing: each row goes through the expert with the highest score only, and its output
  // is multiplied by that expert's softmax probability so the router learns from the loss.
  // While training, noise on the scores keeps every expert in use (Shazeer et al.'s noisy
  // gating, with a fixed scale); it comes from torch's generator, which the host seeds per run.
  torch::Tensor route(const torch::Tensor& x, htm::Linear& router, std::vector<htm::TokenMlp>& experts,
                      int64_t out_dim) {
    auto scores = router->forward(x);
    if (is_training() && router_noise_ > 0) scores = scores + router_noise_ * htm::normal_like_rows(scores);
    auto gate = torch::softmax(scores, -1);  // N×E
    auto [weight, choice] = gate.max(-1);
    auto out = torch::zeros({x.size(0), out_dim}, x.options());
    for (size_t e = 0; e < experts.size(); ++e) {
      auto rows = (choice == static_cast<int64_t>(e)).nonzero().squeeze(1);
      if (rows.numel() == 0) continue;
      out = out.index_copy(0, rows, experts[e]->forward(x.index_select(0, rows)));
    }
    return out * weight.unsqueeze(-1);
  }

  double router_noise_;
  bool residual_;
  htm::Linear merge_router_{nullptr}, unmerge_router_{nullptr};
  std::vector<htm::TokenMlp> merge_, unmerge_;
};

}  // namespace

HTM_REGISTER_PLUGIN(MoeMerge, manifest)
