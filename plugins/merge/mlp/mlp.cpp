// The paper's merge and unmerge operators (§3.1.2-3.1.3): 2C → hC → C and C → hC → 2C MLPs.
#include <cmath>

#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/merge.h"

namespace {

htm::Manifest manifest() {
  return {"mlp",
          htm::PluginKind::merge,
          "2.0.0",
          htm::kSdkAbiVersion,
          "MLP merge (2C->4C->C) and unmerge (C->4C->2C) operators; paper §3.1.2-3.1.3",
          {{"hidden_ratio", htm::ValueType::integer, int64_t{4}, "hidden width as a multiple of the model's width C"},
           {"residual", htm::ValueType::boolean, true,
            "merge = (src + dst)/2 + MLP(LN(src; dst)), children = parent + MLP(LN(parent)) halves, "
            "the MLPs' last layers starting at zero (not in the paper; false: the paper's plain MLPs)"},
           {"init_scale", htm::ValueType::floating, 0.0,
            "residual form only: the MLPs' last layers start at this multiple of the default "
            "initialisation (0: at zero, so a merge starts as the mean and an unmerge as a copy)"}}};
}

class MlpMerge : public htm::MergeOperator {
 public:
  MlpMerge(const htm::Params& params, const htm::BuildContext& ctx) : residual_(params.flag("residual")) {
    const int64_t c = ctx.dim, hidden = params.integer("hidden_ratio") * ctx.dim;
    if (hidden <= 0) throw htm::Error("hidden_ratio must be positive");
    merge_ = register_module("merge", htm::TokenMlp(2 * c, hidden, c, residual_));
    unmerge_ = register_module("unmerge", htm::TokenMlp(c, hidden, 2 * c, residual_));
    const double scale = params.number("init_scale");
    if (!(std::isfinite(scale) && scale >= 0))
      throw htm::Error("init_scale must be a finite number of at least 0, got " + std::to_string(scale));
    if (scale != 0.0 && residual_) {
      torch::NoGradGuard no_grad;
      const double bound = scale / std::sqrt(static_cast<double>(hidden));  // torch::nn::Linear's, scaled
      for (auto* mlp : {&merge_, &unmerge_})
        for (auto& p : (*mlp)->named_parameters())
          if (p.key().rfind("fc2.", 0) == 0) p.value().uniform_(-bound, bound);
    }
  }

  torch::Tensor merge(const torch::Tensor& src, const torch::Tensor& dst) override {
    auto merged = merge_->forward(torch::cat({src, dst}, -1));
    return residual_ ? 0.5 * (src + dst) + merged : merged;
  }

  std::pair<torch::Tensor, torch::Tensor> unmerge(const torch::Tensor& tokens) override {
    auto halves = unmerge_->forward(tokens).chunk(2, -1);
    if (residual_) return {tokens + halves[0], tokens + halves[1]};
    return {halves[0], halves[1]};
  }

 private:
  bool residual_;
  htm::TokenMlp merge_{nullptr}, unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(MlpMerge, manifest)
