// The decoder (paper §3.1), the encoder's mirror image with the same schedule and depth signals:
// at each depth the unmerge layer (the policy picks r tokens to split, or the encoder's merges
// are undone where it recorded them, model.unmerge = "mirror"; the merge operator splits each;
// the refinement block updates the population), then the mixer. Also generation from root
// tokens (paper A.1, slides) and the anytime loss's reconstructions from intermediate levels.
#include <algorithm>
#include <utility>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "htm/error.h"
#include "model/model.h"
#include "model/plugin_calls.h"

namespace htm {

torch::Tensor HtmModelImpl::reorder(const torch::Tensor& z, const torch::Tensor& origin) {
  return torch::zeros_like(z).scatter(1, origin.unsqueeze(-1).expand_as(z), z);
}

torch::Tensor HtmModelImpl::unmerge_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                                          ForwardResult& result, const torch::Tensor& forced, torch::Tensor* chosen) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto [keys, values] = unmerge_refine_->key_values(x);
  if (r == 0) return unmerge_refine_->forward(x, keys, values);
  auto ctx = context_for<UnmergeContext>(x, r, depth, generator);
  ctx.forced = forced;
  UnmergeDecision decision;
  {
    PluginScope scope(PluginKind::policy, &policy(), "choose_unmerges");
    decision = policy().choose_unmerges(ctx);
    const bool range = values_checked_[1].insert(&policy()).second;
    check_decision(decision.index, "unmerge decision's index", B, r, T, range);
    check_log_prob(decision.log_prob, "unmerge decision's log_prob", B, r);
  }
  if (forced.defined()) {
    if (!decision.index.defined() || !torch::equal(decision.index, forced))
      throw Error(
          "the policy ignored UnmergeContext::forced, so it cannot be teacher-forced "
          "(see docs/writing-a-plugin.md)");
    result.unmerge_log_probs.push_back(decision.log_prob);
  } else {
    result.draws.push_back(Draw::unmerge(depth, x, decision));
  }

  if (chosen != nullptr) *chosen = decision.index;
  torch::Tensor first, second;
  {
    PluginScope scope(PluginKind::merge, merge_.get(), "unmerge");
    std::tie(first, second) = merge_->unmerge(gather_tokens(x, decision.index).reshape({B * r, C}));
    check_tokens(first, "merge operator's unmerge() (first)", B * r, C);
    check_tokens(second, "merge operator's unmerge() (second)", B * r, C);
  }
  first = first.view({B, r, C}), second = second.view({B, r, C});
  if (auto factor = scale_(decision.log_prob); factor.defined()) {
    first = first * factor;
    second = second * factor;
  }
  auto y = torch::cat({x.scatter(1, decision.index.unsqueeze(-1).expand({B, r, C}), first), second}, 1);
  return unmerge_refine_->forward(y, keys, values);
}

torch::Tensor HtmModelImpl::decoder_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                                          ForwardResult& result, const torch::Tensor& forced, torch::Tensor* chosen) {
  torch::Tensor y;
  {
    RECORD_FUNCTION("htm::unmerge_layer", {});
    y = unmerge_layer(x + timestep(depth), r, depth, generator, result, forced, chosen);
  }
  if (!decoder_block_) return y;  // no mixing
  RECORD_FUNCTION("htm::decoder_block", {});
  return decoder_block_->forward(y);
}

torch::Tensor HtmModelImpl::decode(ForwardResult& result, torch::Tensor y, int64_t from,
                                   const std::vector<int64_t>& schedule, at::Generator generator, bool record,
                                   LeafLessons* leaf) {
  for (int64_t d = from; d >= 1; --d) {
    const auto before = y;
    torch::Tensor chosen;
    const MirrorSplit* mirror = result.mirrors.empty() ? nullptr : &result.mirrors[d - 1];
    y = decoder_layer(y, schedule[d - 1], d, generator, result, mirror ? mirror->forced : torch::Tensor(),
                      record && leaf != nullptr ? &chosen : nullptr);
    if (mirror) y = reorder(y, mirror->origin);
    if (!record) continue;
    if (chosen.defined()) leaf->decoded(before, chosen);
    result.decoder_tokens[d - 1] = y;
  }
  return y;
}

torch::Tensor HtmModelImpl::reconstruct_level(ForwardResult& result, int64_t level,
                                              const std::vector<int64_t>& schedule, at::Generator generator) {
  if (level < 1 || level >= static_cast<int64_t>(result.populations.size()))
    throw Error("reconstruct_level: level " + std::to_string(level) + " is not an intermediate population of a " +
                std::to_string(result.populations.size()) + "-layer pass");
  RECORD_FUNCTION("htm::anytime", {});
  return unlift(decode(result, result.populations[level - 1], level, schedule, generator, false, nullptr));
}

std::vector<torch::Tensor> HtmModelImpl::generate(const torch::Tensor& roots, const std::vector<int64_t>& schedule,
                                                  at::Generator generator, bool by_classifier, double leaf_threshold) {
  if (!unmerge_refine_) throw Error("a classifier has no decoder to generate with");
  if (by_classifier && !has_leaf_classifier())
    throw Error("decoding by the leaf/internal classifier needs a model trained with model.leaf_classifier = true");
  torch::NoGradGuard no_grad;
  const int64_t depth = static_cast<int64_t>(schedule.size());
  ForwardResult scratch;
  std::vector<torch::Tensor> outputs;
  if (!by_classifier) {
    auto x = roots;
    for (int64_t d = depth; d >= 1; --d) x = decoder_layer(x, schedule[d - 1], d, generator, scratch);
    auto out = unlift(x);
    for (int64_t b = 0; b < out.size(0); ++b) outputs.push_back(out[b]);
    return outputs;
  }
  for (int64_t b = 0; b < roots.size(0); ++b) {
    auto x = roots.narrow(0, b, 1);
    for (int64_t d = depth; d >= 1; --d) {
      auto p_leaf = torch::softmax(leaf_logits(x)[0], -1).select(-1, 0);
      auto split = (p_leaf <= leaf_threshold).nonzero().view({1, -1});
      if (split.size(1) == 0) break;
      x = decoder_layer(x, split.size(1), d, generator, scratch, split);
    }
    outputs.push_back(unlift(x)[0]);
  }
  return outputs;
}

}  // namespace htm
