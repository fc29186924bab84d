// The encoder (paper §3.1): at each depth the depth signal, the mixer (the transformer block, or
// none), then the merge layer: the policy draws r disjoint pairs (or scores replayed ones), the
// merge operator merges each, the src tokens drop out and the refinement block updates the rest.
#include <utility>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "htm/error.h"
#include "kernels/backend.h"
#include "kernels/graph_draws.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/plugin_calls.h"

namespace htm {

torch::Tensor HtmModelImpl::gather_tokens(const torch::Tensor& x, const torch::Tensor& index) {
  return x.gather(1, index.unsqueeze(-1).expand({index.size(0), index.size(1), x.size(2)}));
}

// `merges` is ForwardResult::merges just after the layer: a layer that merged (r > 0) added its
// decision last.
MirrorSplit HtmModelImpl::mirror_of(const torch::Tensor& keep, const std::vector<MergeDecision>& merges, int64_t T,
                                    int64_t r) {
  if (r == 0) return {{}, keep};
  const int64_t B = keep.size(0);
  auto position =
      torch::full({B, T}, -1, keep.options().dtype(torch::kLong));  // index before the merge → position after
  position.scatter_(1, keep, torch::arange(T - r, keep.options().dtype(torch::kLong)).expand({B, T - r}).contiguous());
  return {position.gather(1, merges.back().dst), torch::cat({keep, merges.back().src}, 1)};
}

torch::Tensor HtmModelImpl::enter(const torch::Tensor& x, int64_t d, const ForwardHooks* hooks) {
  auto y = x + timestep(d);
  if (hooks != nullptr && hooks->layer_entry) y = hooks->layer_entry(y, d);
  return y;
}

torch::Tensor HtmModelImpl::mix_encoder(const torch::Tensor& x, torch::Tensor* attention) {
  if (!encoder_block_) return x;
  RECORD_FUNCTION("htm::encoder_block", {});
  return encoder_block_->forward(x, policy().needs_attention() ? attention : nullptr);
}

torch::Tensor HtmModelImpl::encode(ForwardResult& result, torch::Tensor x, const std::vector<int64_t>& schedule,
                                   at::Generator generator, std::optional<Truth> truth, const ForwardHooks* hooks,
                                   LeafLessons* leaf) {
  const int64_t depth = static_cast<int64_t>(schedule.size());
  const bool replay = hooks != nullptr && !hooks->merges.empty();
  if (replay && hooks->merges.size() != schedule.size())
    throw Error("a replayed draw has a decision for every layer run");
  for (int64_t d = 1; d <= depth; ++d) {
    x = enter(x, d, hooks);
    result.encoder_tokens.push_back(x);
    torch::Tensor attention, keep;
    x = mix_encoder(x, &attention);
    RECORD_FUNCTION("htm::merge_layer", {});
    const int64_t T = x.size(1), r = schedule[d - 1];
    const bool need_keep = leaf != nullptr || mirrors_;
    x = merge_layer(x, r, d, attention, generator, result, need_keep ? &keep : nullptr, truth ? &*truth : nullptr,
                    replay ? &hooks->merges[d - 1] : nullptr, hooks);
    if (mirrors_) result.mirrors.push_back(mirror_of(keep, result.merges, T, r));
    result.populations.push_back(x);
    if (leaf != nullptr) leaf->encoded(x, r > 0 ? &result.merges.back() : nullptr, keep);
  }
  return x;
}

// The best r pairs of the policy's logits, taken greedily (greedy_merges()), with their
// log-probabilities as a draw of those pairs would have them; the policy's own choice when it
// gives no logits or logits that prefer nothing (all equal: `random`), whose greedy maximum
// would be the tokens' index order.
MergeDecision HtmModelImpl::greedy_decision(const MergeContext& ctx) {
  auto logits = policy().merge_logits(ctx);
  if (!logits.defined()) return policy().choose_merges(ctx);
  // Under runtime.cuda_graph nothing is read back: both decisions are made and one is chosen on
  // the device (the drawn one's log-probability then the logits'; an evaluation reads neither).
  const bool on_device = drawing_as_graph();
  if (!on_device && (logits.max() == logits.min()).item<bool>()) return policy().choose_merges(ctx);
  auto [src, dst] = greedy_disjoint_pairs(logits, ctx.r);  // the bound is monotone: the same pairs
  if (on_device) {
    const MergeDecision drawn = policy().choose_merges(ctx);
    const auto alike = logits.max() == logits.min();
    src = torch::where(alike, drawn.src, src), dst = torch::where(alike, drawn.dst, dst);
  }
  return {src, dst, pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound)};
}

// How well each merged pair of a draw comes apart again under the merge operator's unmerge: the
// dense reward's local error (ForwardHooks::pair_errors).
torch::Tensor HtmModelImpl::pair_error(const Draw& draw) {
  torch::NoGradGuard no_grad;
  const int64_t B = draw.merged.size(0), r = draw.merged.size(1), C = draw.merged.size(2);
  auto [first, second] = merge_->unmerge(draw.merged.view({B * r, C}));  // the first child takes dst's place
  return (first.view({B, r, C}) - gather_tokens(draw.population, draw.dst)).pow(2).mean(-1) +
         (second.view({B, r, C}) - gather_tokens(draw.population, draw.src)).pow(2).mean(-1);
}

torch::Tensor HtmModelImpl::merge_layer(const torch::Tensor& x, int64_t r, int64_t depth,
                                        const torch::Tensor& attention, at::Generator generator, ForwardResult& result,
                                        torch::Tensor* keep_out, Truth* truth, const MergeDecision* replayed,
                                        const ForwardHooks* hooks) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto [keys, values] = merge_refine_->key_values(x);
  if (r == 0) {
    result.merges.push_back({});
    if (keep_out != nullptr) *keep_out = torch::arange(T, x.options().dtype(torch::kLong)).expand({B, T});
    return merge_refine_->forward(x, keys, values);
  }
  auto ctx = context_for<MergeContext>(x, r, depth, generator);
  ctx.attention = attention;
  ctx.cross_keys = keys;
  ctx.logit_bound = options_.logit_bound;
  torch::Tensor parent_of_node;  // B×T: the truth's parent of each token's node (−1: none)
  if (truth != nullptr) {
    parent_of_node = truth->parent.gather(1, truth->node.clamp_min(0)).masked_fill(truth->node < 0, -1);
    auto same = parent_of_node.unsqueeze(2) == parent_of_node.unsqueeze(1);
    ctx.siblings = (same & (parent_of_node >= 0).unsqueeze(2)).to(torch::kFloat);
    ctx.siblings.diagonal(0, 1, 2).zero_();
  }
  MergeDecision decision;
  {
    PluginScope scope(PluginKind::policy, &policy(), "choose_merges");
    if (replayed != nullptr) {  // a replayed draw: the policy scores the pairs given
      auto logits = policy().merge_logits(ctx);
      if (!logits.defined())
        throw Error("replaying merges (estimator.replay) needs a policy that gives its merge_logits()");
      decision = {replayed->src, replayed->dst,
                  pair_log_prob(logits, replayed->src, replayed->dst, ctx.log_prob_form, ctx.logit_bound)};
    } else if (greedy_merges_ && !is_training()) {
      decision = greedy_decision(ctx);
    } else {
      decision = policy().choose_merges(ctx);
    }
    const bool range = values_checked_[0].insert(&policy()).second;  // values: once per policy
    check_decision(decision.src, "merge decision's src", B, r, T, range);
    check_decision(decision.dst, "merge decision's dst", B, r, T, range);
    check_log_prob(decision.log_prob, "merge decision's log_prob", B, r);
  }
  // No entropy bonus: the entropy is a diagnostic, and its B×T×T intermediates go at once.
  if (!options_.entropy_gradients && decision.entropy.defined()) decision.entropy = decision.entropy.detach();
  Draw draw = Draw::merge(depth, x, decision);

  torch::Tensor merged;
  {
    PluginScope scope(PluginKind::merge, merge_.get(), "merge");
    auto src = gather_tokens(x, decision.src), dst = gather_tokens(x, decision.dst);
    merged = merge_->merge(src.reshape({B * r, C}), dst.reshape({B * r, C}));
    check_tokens(merged, "merge operator's merge()", B * r, C);
    merged = merged.view({B, r, C});
    draw.merged = merged.detach();
    if (hooks != nullptr && hooks->pair_errors && draw.log_prob.defined()) draw.pair_error = pair_error(draw);
    result.draws.push_back(std::move(draw));
  }
  if (auto factor = scale_(decision.log_prob); factor.defined()) merged = merged * factor;
  auto y = x.scatter(1, decision.dst.unsqueeze(-1).expand({B, r, C}), merged);
  // Drop the src tokens, keeping the others in their original order (on a GPU in one launch).
  auto keep = backend_for(x).kept_tokens(decision.src, T);
  if (keep_out != nullptr) *keep_out = keep;
  if (truth != nullptr) {  // a merge of true siblings is their parent; any other merge is no node
    auto src_parent = parent_of_node.gather(1, decision.src), dst_parent = parent_of_node.gather(1, decision.dst);
    auto merged_node = src_parent.masked_fill((src_parent != dst_parent) | (src_parent < 0), -1);
    truth->node = truth->node.scatter(1, decision.dst, merged_node).gather(1, keep);
  }
  result.merges.push_back(std::move(decision));
  return merge_refine_->forward(gather_tokens(y, keep), keys, values);
}

}  // namespace htm
