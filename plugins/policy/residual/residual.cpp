// A learned merge policy that starts where `nearest` is: logits = −d(x_i, x_j)/τ + g·q(x_i)ᵀk(x_j),
// the distance on the detached tokens as `nearest` measures it, 1/τ learned (from its initial
// value), and the paper's bilinear score behind a learned gate g that starts at 0. At the first
// step it draws from softmax(−d/τ); what training adds is the residual g·qᵀk. Unmerges learned
// (the paper's scorer) or uniform (as `nearest`'s), so each comparison changes one thing.
#include <cmath>

#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/pair_distances.h"
#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"residual",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Learned merge policy anchored at nearest: logits -distance/temperature (inverse temperature learned) "
          "plus a gated bilinear residual (gate starts at 0); learned or uniform unmerges",
          {{"distance", ValueType::string, std::string("euclidean"),
            "euclidean, or cosine (1 - cosine similarity), between the detached tokens (as nearest)"},
           {"temperature", ValueType::floating, 0.1, "initial temperature of the distance term, above 0"},
           {"learn_temperature", ValueType::boolean, true, "train the inverse temperature; false: keep it fixed"},
           {"residual", ValueType::boolean, true,
            "add the gated bilinear residual; false: the distance term alone (nearest sampled at its temperature)"},
           {"unmerges", ValueType::string, std::string("learned"),
            "learned (the paper's scoring MLP) or uniform (as nearest and random)"},
           {"heads", ValueType::integer, int64_t{0}, "residual heads; 0 = the model's heads"},
           {"score_hidden", ValueType::integer, int64_t{0},
            "hidden width of the unmerge scoring MLP; 0 = the model's width"}}};
}

class ResidualPolicy : public htm::Policy {
 public:
  ResidualPolicy(const htm::Params& params, const htm::BuildContext& ctx)
      : distance_(params.text("distance")),
        heads_(params.integer_or("heads", ctx.heads)),
        residual_(params.flag("residual")) {
    const double temperature = params.number("temperature");
    const std::string unmerges = params.text("unmerges");
    htm::check_pair_distance("residual", distance_);
    if (!(temperature > 0) || std::isinf(temperature))
      throw htm::Error("residual: temperature must be a finite number above 0, got " + std::to_string(temperature));
    if (unmerges != "learned" && unmerges != "uniform")
      throw htm::Error("residual: unmerges must be \"learned\" or \"uniform\", got \"" + unmerges + "\"");
    if (residual_ && ctx.dim % heads_ != 0)
      throw htm::Error("residual: heads (" + std::to_string(heads_) + ") must divide model.dim (" +
                       std::to_string(ctx.dim) + ")");
    log_inverse_temperature_ = register_parameter("log_inverse_temperature", torch::full({1}, -std::log(temperature)),
                                                  /*requires_grad=*/params.flag("learn_temperature"));
    if (residual_) {
      norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({ctx.dim})));
      query_ = register_module("query", htm::Linear(ctx.dim, ctx.dim));
      key_ = register_module("key", htm::Linear(ctx.dim, ctx.dim));
      head_weight_ = register_parameter("head_weight", torch::full({heads_}, 1.0 / heads_));
      gate_ = register_parameter("gate", torch::zeros({1}));
    }
    if (unmerges == "learned") {
      const int64_t hidden = params.integer_or("score_hidden", ctx.dim);
      unmerge_ = register_module("unmerge", htm::UnmergeScorer(ctx.dim, hidden));
    }
  }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    if (!logits.requires_grad()) return {src, dst, torch::Tensor()};  // nothing here learns
    return {src, dst, htm::pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            htm::pair_entropy(logits, ctx.logit_bound)};
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override {
    return unmerge_ ? unmerge_->choose(ctx) : htm::uniform_unmerges(ctx);
  }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    auto logits = htm::minus_pair_distances(ctx.tokens, distance_) * log_inverse_temperature_.exp();
    if (!residual_) return logits;
    return logits + gate_ * htm::bilinear_pair_logits(ctx.tokens.detach(), *norm_, query_, key_, head_weight_);
  }

 private:
  std::string distance_;
  int64_t heads_;
  bool residual_;
  torch::Tensor log_inverse_temperature_, head_weight_, gate_;
  torch::nn::LayerNorm norm_{nullptr};
  htm::Linear query_{nullptr}, key_{nullptr};
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(ResidualPolicy, manifest)
