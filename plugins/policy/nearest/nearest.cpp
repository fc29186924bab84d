// Agglomerative clustering as a merge policy: at every layer, disjoint pairs of the closest
// tokens (or, with order = "farthest", the farthest: the anti-similarity rule). A non-learned
// baseline that a learned policy must beat.
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/pair_distances.h"
#include "htm/policy.h"
#include "htm/sets.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"nearest",
          htm::PluginKind::policy,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Merges disjoint pairs of the closest (or farthest) tokens, greedily (agglomerative clustering as a "
          "policy) or drawn from softmax(-distance/temperature); uniform unmerging; a baseline",
          {{"distance", ValueType::string, std::string("euclidean"),
            "euclidean, or cosine (1 - cosine similarity), between the detached tokens"},
           {"order", ValueType::string, std::string("closest"),
            "closest: the nearest pairs first; farthest: the most distant first (with cosine: the least similar)"},
           {"temperature", ValueType::floating, 0.0,
            "0: the closest pairs, greedily and deterministically; "
            "> 0: pairs drawn from softmax(-distance/temperature)"}}};
}

class NearestPolicy : public htm::Policy {
 public:
  NearestPolicy(const htm::Params& params, const htm::BuildContext&)
      : distance_(params.text("distance")),
        sign_(params.text("order") == "farthest" ? -1.0 : 1.0),
        temperature_(params.number("temperature")) {
    htm::check_pair_distance("nearest", distance_);
    if (params.text("order") != "closest" && params.text("order") != "farthest")
      throw htm::Error("nearest: order must be \"closest\" or \"farthest\", got \"" + params.text("order") + "\"");
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
    auto [src, dst] = htm::greedy_disjoint_pairs(logits, ctx.r);  // on the device where the gpu kernels run
    return {torch::minimum(src, dst), torch::maximum(src, dst), torch::Tensor()};  // d is symmetric
  }

  // -d/temperature (+d/temperature farthest first), the logits the pairs are drawn from; at
  // temperature 0, -d (+d): the merges are then its greedy maximum, not a draw from its softmax.
  // The diagonal is ignored.
  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    auto logits = htm::minus_pair_distances(ctx.tokens, distance_);
    if (sign_ < 0) logits.neg_();
    return temperature_ > 0 ? logits.div_(temperature_) : logits;
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return htm::uniform_unmerges(ctx); }

 private:
  std::string distance_;
  double sign_;  // +1 closest first, -1 farthest first
  double temperature_;
};

}  // namespace

HTM_REGISTER_PLUGIN(NearestPolicy, manifest)
