// A merge policy in the spirit of Token Merging (Bolya et al.): merge the pairs of tokens whose
// directions agree most. Nothing to learn, so it returns no log-probabilities.
#include <torch/types.h>  // the parts of libtorch it uses (<torch/torch.h> would do, at twice the compile time)

#include <htm/policy.h>
#include <torch/nn/functional/normalization.h>  // after types.h: libtorch 1.13's padding.h needs it first

namespace {

htm::Manifest manifest() {
  return {"cosine",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Merges the most similar tokens: softmax of cosine similarity / temperature",
          {{"temperature", htm::ValueType::floating, 0.1, "softmax temperature; lower is greedier"}}};
}

class CosinePolicy : public htm::Policy {
 public:
  CosinePolicy(const htm::Params& params, const htm::BuildContext&) : temperature_(params.number("temperature")) {
    if (temperature_ <= 0) throw htm::Error("temperature must be positive");
  }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);  // B×T×T
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, torch::Tensor()};
  }

  // Optional: what the merges are drawn from (docs/writing-a-plugin.md, "merge_logits").
  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    auto unit =
        torch::nn::functional::normalize(ctx.tokens.detach(), torch::nn::functional::NormalizeFuncOptions().dim(-1));
    return torch::bmm(unit, unit.transpose(1, 2)) / temperature_;
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override {
    return htm::uniform_unmerges(ctx);  // uniform; honours teacher forcing
  }

 private:
  double temperature_;
};

}  // namespace

HTM_REGISTER_PLUGIN(CosinePolicy, manifest)
