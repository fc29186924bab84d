// The oracle policy, for signal studies: it merges the pairs of tokens that are siblings in the
// data's true hierarchy, so a study can ask whether the reward prefers the truth (HTM slides:
// Trees, Crosses). It reads MergeContext::siblings and is refused on data without a tree.
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/policy.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"oracle",
          htm::PluginKind::policy,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Merges true siblings of the data's hierarchy (Batch::tree) first, the rest uniformly: "
          "a ceiling for studies, never a learner; needs a dataset with a tree",
          {{"truth_fraction", ValueType::floating, 1.0,
            "probability that a sample's merges follow the truth; the others merge uniformly at random"},
           {"direction", ValueType::string, std::string("drawn"),
            "drawn: each pair's direction i->j as the draw gives it (uniform); content: the token whose first "
            "feature is smaller merges into the other (one direction for one content)"}}};
}

// A true pair outweighs every other by e^30: the draw takes all available true pairs first.
constexpr double kTruthLogit = 30.0;

class OraclePolicy : public htm::Policy {
 public:
  OraclePolicy(const htm::Params& params, const htm::BuildContext&)
      : truth_fraction_(params.number("truth_fraction")), by_content_(params.text("direction") == "content") {
    if (!(truth_fraction_ >= 0 && truth_fraction_ <= 1)) throw htm::Error("truth_fraction must be in [0, 1]");
    if (params.text("direction") != "drawn" && !by_content_)
      throw htm::Error("oracle: direction must be \"drawn\" or \"content\", got \"" + params.text("direction") + "\"");
  }

  bool needs_truth() const override { return true; }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    if (!ctx.siblings.defined())
      throw htm::Error("the oracle policy needs the data's true hierarchy, and this batch has none");
    auto logits = merge_logits(ctx);
    if (truth_fraction_ < 1) {  // per sample: follow the truth, or merge uniformly
      auto follow = torch::empty({logits.size(0), 1, 1}, torch::TensorOptions().device(ctx.generator.device()))
                        .bernoulli_(truth_fraction_, ctx.generator)
                        .to(logits.device());
      logits = logits * follow;
    }
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    if (by_content_) {  // src: the token whose first feature is smaller
      auto first = ctx.tokens.detach().select(2, 0);
      auto swap = first.gather(1, src) > first.gather(1, dst);
      auto s = torch::where(swap, dst, src), d = torch::where(swap, src, dst);
      return {s, d, torch::Tensor(), torch::Tensor()};
    }
    return {src, dst, torch::Tensor(), torch::Tensor()};
  }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    if (!ctx.siblings.defined()) return {};  // no truth given: it cannot say
    return ctx.siblings.to(torch::kFloat) * kTruthLogit;
  }

  // The decoder unmerges uniformly (all tokens, under a 100 % schedule, which Trees uses).
  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return htm::uniform_unmerges(ctx); }

 private:
  double truth_fraction_;
  bool by_content_;
};

}  // namespace

HTM_REGISTER_PLUGIN(OraclePolicy, manifest)
