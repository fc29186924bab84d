// Agglomerative clustering as a merge policy: at every layer, disjoint pairs of the closest
// tokens. A non-learned baseline that a learned policy must beat.
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/greedy_pairs.h"
#include "htm/policy.h"
#include "htm/sets.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"nearest",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Merges disjoint pairs of the closest tokens, greedily (agglomerative clustering as a policy) "
          "or drawn from softmax(-distance/temperature); uniform unmerging; a baseline",
          {{"distance", ValueType::string, std::string("euclidean"),
            "euclidean, or cosine (1 - cosine similarity), between the detached tokens"},
           {"temperature", ValueType::floating, 0.0,
            "0: the closest pairs, greedily and deterministically; "
            "> 0: pairs drawn from softmax(-distance/temperature)"}}};
}

class NearestPolicy : public htm::Policy {
 public:
  NearestPolicy(const htm::Params& params, const htm::BuildContext&)
      : distance_(params.text("distance")), temperature_(params.number("temperature")) {
    if (distance_ != "euclidean" && distance_ != "cosine")
      throw htm::Error("nearest: distance must be \"euclidean\" or \"cosine\", got \"" + distance_ + "\"");
    if (!(temperature_ >= 0))
      throw htm::Error("nearest: temperature must be 0 (greedy) or positive, got " + std::to_string(temperature_));
  }

  // Greedy: the pair of unused tokens at the least distance, then the next, each pair merging its
  // lower index into its higher. Sampled: one pair at a time from softmax(-d/temperature) over
  // the ordered pairs of unused tokens.
  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    if (temperature_ > 0) {
      auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
      return {src, dst, torch::Tensor()};
    }
    auto [src, dst] = htm::greedy_pairs(logits, ctx.r);
    return {torch::minimum(src, dst), torch::maximum(src, dst), torch::Tensor()};  // d is symmetric
  }

  // -d/temperature, the logits the pairs are drawn from; at temperature 0, -d: the merges are
  // then its greedy maximum, not a draw from its softmax. The diagonal (0) is ignored.
  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    auto logits = minus_distances(ctx.tokens);
    return temperature_ > 0 ? logits.div_(temperature_) : logits;
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return htm::uniform_unmerges(ctx); }

 private:
  // B×T×T, minus the distances between the detached tokens (nothing here is learned), computed in
  // place: at B = T = 256 each fresh B×T×T tensor costs more than the greedy matching itself.
  torch::Tensor minus_distances(const torch::Tensor& tokens) const {
    torch::NoGradGuard no_grad;
    auto x = tokens.detach().to(torch::kFloat);
    if (distance_ == "euclidean") return torch::cdist(x, x).neg_();
    auto unit = torch::nn::functional::normalize(x, torch::nn::functional::NormalizeFuncOptions().dim(-1));
    return torch::bmm(unit, unit.transpose(1, 2)).sub_(1);  // cos - 1 = -(1 - cos)
  }

  std::string distance_;
  double temperature_;
};

}  // namespace

HTM_REGISTER_PLUGIN(NearestPolicy, manifest)
