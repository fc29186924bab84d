// ToMe's bipartite soft matching (Bolya et al., "Token Merging: Your ViT But Faster", ICLR 2023)
// as a merge policy: even tokens (A) merge into their most similar odd tokens (B), one to one.
// A non-learned baseline that a learned policy must beat.
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/greedy_pairs.h"
#include "htm/policy.h"
#include "htm/row_shard.h"
#include "htm/sets.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"tome",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "ToMe's bipartite soft matching (Bolya et al. 2023), one to one: even tokens merge into their most "
          "cosine-similar odd tokens, the best edges first; uniform unmerging; a baseline",
          {{"similarity", ValueType::string, std::string("tokens"),
            "tokens, or keys (the merging block's cross-attention keys): what cosine similarity compares"},
           {"temperature", ValueType::floating, 0.0,
            "0: the most similar edges, greedily and deterministically; > 0: edges drawn from "
            "softmax(similarity/temperature)"}}};
}

// What merge_logits() puts on the pairs ToMe never merges (A→A, B→anything): finite, so that a
// softmax over a row of them (policy_spread, the heatmap) stays defined, yet e^-1e9 = 0 beside any edge.
constexpr float kNever = -1e9f;

class TomePolicy : public htm::Policy {
 public:
  TomePolicy(const htm::Params& params, const htm::BuildContext&)
      : keys_(params.text("similarity") == "keys"), temperature_(params.number("temperature")) {
    const std::string& similarity = params.text("similarity");
    if (similarity != "tokens" && similarity != "keys")
      throw htm::Error("tome: similarity must be \"tokens\" or \"keys\", got \"" + similarity + "\"");
    if (!(temperature_ >= 0))
      throw htm::Error("tome: temperature must be 0 (greedy) or positive, got " + std::to_string(temperature_));
  }

  bool needs_cross_keys() const override { return keys_; }

  // Edges A→B (src even, dst odd) taken in descending similarity while both their tokens are
  // unused: an A token whose best B is taken falls back to its best unused B. Sampled: the same
  // scan on similarity/temperature plus Gumbel noise, which draws one edge at a time from the
  // softmax over the edges between unused tokens (as htm::sample_disjoint_pairs does, but never
  // off A→B).
  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto similarity = bipartite_similarity(ctx);
    if (temperature_ > 0) similarity.div_(temperature_).add_(gumbel_like(similarity, ctx.generator));
    const int64_t T = ctx.tokens.size(1);
    std::vector<int64_t> even((T + 1) / 2), odd(T / 2);
    for (int64_t k = 0; k < T; ++k) (k % 2 == 0 ? even[k / 2] : odd[k / 2]) = k;
    // At temperature 0 on the device where the gpu kernels run (a capturable step); the sampled
    // scan's noise is drawn on the run's generator and scanned on the host.
    auto [src, dst] = temperature_ > 0 ? htm::greedy_pairs(similarity, ctx.r, even, odd, T)
                                       : htm::greedy_disjoint_pairs(similarity, ctx.r, even, odd, T);
    return {src, dst, torch::Tensor()};
  }

  // B×T×T: the A→B cosine similarity (over the temperature when it is > 0), kNever elsewhere. At
  // temperature 0 the merges are its greedy maximum, not a draw from its softmax.
  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    auto similarity = bipartite_similarity(ctx);
    return spread(temperature_ > 0 ? similarity.div_(temperature_) : similarity);
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override { return htm::uniform_unmerges(ctx); }

 private:
  // B×⌈T/2⌉×⌊T/2⌋ cosine similarity of the even tokens (A) to the odd ones (B), on the detached
  // tokens or keys: ToMe's `scores` in bipartite_soft_matching.
  torch::Tensor bipartite_similarity(const htm::MergeContext& ctx) const {
    if (keys_ && !ctx.cross_keys.defined())
      throw htm::Error(
          "tome: similarity = \"keys\" needs the merging block's cross-attention (model.cross_attention = true)");
    torch::NoGradGuard no_grad;
    auto metric = (keys_ ? ctx.cross_keys : ctx.tokens).detach().to(torch::kFloat);
    auto unit = torch::nn::functional::normalize(metric, torch::nn::functional::NormalizeFuncOptions().dim(-1));
    const int64_t T = unit.size(1);
    return torch::bmm(unit.slice(1, 0, T, 2), unit.slice(1, 1, T, 2).transpose(1, 2));
  }

  // The A×B block placed at rows 0, 2, 4, … and columns 1, 3, 5, … of a B×T×T tensor of kNever.
  static torch::Tensor spread(const torch::Tensor& bipartite) {
    const int64_t B = bipartite.size(0), T = bipartite.size(1) + bipartite.size(2);
    auto full = torch::full({B, T, T}, kNever, bipartite.options());
    full.slice(1, 0, T, 2).slice(2, 1, T, 2).copy_(bipartite);
    return full;
  }

  // Gumbel(0, 1) noise drawn for the whole batch (draw_rows), so that data-parallel ranks agree.
  static torch::Tensor gumbel_like(const torch::Tensor& t, at::Generator generator) {
    const htm::DrawRows rows = htm::draw_rows(t.size(0));
    // Drawn where the generator lives (a run's are on the CPU), used where t lives.
    auto e = torch::empty({rows.rows, t.size(1), t.size(2)}, torch::TensorOptions().device(generator.device()))
                 .exponential_(1.0, generator);
    return e.narrow(0, rows.offset, t.size(0)).log_().neg_().to(t.device());
  }

  bool keys_;
  double temperature_;
};

}  // namespace

HTM_REGISTER_PLUGIN(TomePolicy, manifest)
