// One pass of the model: lift → encode → the head (reconstruct through the decoder, or classify
// from the root); the teacher-forced pass; the calls into the adapter and the truth an oracle
// policy follows. The parts are assembled in assembly.cpp.
#include "model/model.h"

#include <algorithm>
#include <utility>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "htm/error.h"

namespace htm {
namespace F = torch::nn::functional;

ForwardResult HtmModelImpl::forward(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                    at::Generator generator, const ForwardHooks* hooks) {
  ForwardResult result;
  torch::Tensor x;
  {
    RECORD_FUNCTION("htm::lift", {});
    x = lift(input);  // B×T×C
  }
  std::optional<LeafLessons> leaf;
  if (has_leaf_classifier()) leaf.emplace(x);
  result.root = encode(result, x, schedule, generator, truth_for(input, hooks), hooks, leaf ? &*leaf : nullptr);
  (this->*end_)(result, schedule, generator, hooks, leaf ? &*leaf : nullptr);
  return result;
}

void HtmModelImpl::classify_head(ForwardResult& result, const std::vector<int64_t>&, at::Generator, const ForwardHooks*,
                                 LeafLessons*) {  // §4.1: the root into a linear head
  result.output = head_->forward(head_norm_->forward(result.root.mean(1)));
}

void HtmModelImpl::reconstruct_head(ForwardResult& result, const std::vector<int64_t>& schedule,
                                    at::Generator generator, const ForwardHooks* hooks, LeafLessons* leaf) {
  const int64_t depth = static_cast<int64_t>(schedule.size());
  result.decoder_tokens.resize(depth);
  auto x = decode(result, result.root, depth, schedule, generator, true, leaf);
  if (hooks != nullptr && hooks->levels)  // the anytime loss's reconstructions, after the main decode
    for (int64_t level = 1; level < static_cast<int64_t>(result.populations.size()); ++level)
      result.levels.push_back(reconstruct_level(result, level, schedule, generator));
  if (leaf != nullptr) {  // the decoder's last population is leaves
    leaf->lessons.emplace_back(x, torch::zeros({x.size(0), x.size(1)}, x.options().dtype(torch::kLong)));
    std::vector<torch::Tensor> logits, targets;
    for (const auto& [tokens, labels] : leaf->lessons) {
      logits.push_back(leaf_logits(tokens));
      targets.push_back(labels);
    }
    auto all_logits = torch::cat(logits, 1), all_targets = torch::cat(targets, 1);  // B×P×2, B×P
    auto labelled = (all_targets >= 0).to(torch::kFloat);
    auto ce = F::cross_entropy(all_logits.reshape({-1, 2}), all_targets.clamp_min(0).reshape({-1}),
                               F::CrossEntropyFuncOptions().reduction(torch::kNone))
                  .view_as(labelled);
    result.leaf_loss = (ce * labelled).sum(1) / labelled.sum(1).clamp_min(1);
    if (!is_training()) {
      auto hits = (all_logits.argmax(-1) == all_targets).to(torch::kFloat) * labelled;
      // float64 on the device, nothing read here (an evaluation reads it with its other results)
      result.leaf_accuracy = hits.sum().to(torch::kDouble) / labelled.sum().clamp_min(1).to(torch::kDouble);
    }
  }
  RECORD_FUNCTION("htm::unlift", {});
  result.output = unlift(x);
}

HtmModelImpl::LeafLessons::LeafLessons(const torch::Tensor& lifted)
    : internal(torch::zeros({lifted.size(0), lifted.size(1)}, lifted.options().dtype(torch::kLong))) {
  lessons.emplace_back(lifted, internal);
}

void HtmModelImpl::LeafLessons::encoded(const torch::Tensor& population, const MergeDecision* merged,
                                        const torch::Tensor& keep) {
  if (merged != nullptr) internal = internal.scatter(1, merged->dst, 1);
  internal = internal.gather(1, keep);
  lessons.emplace_back(population, internal);
}

void HtmModelImpl::LeafLessons::decoded(const torch::Tensor& before, const torch::Tensor& chosen) {
  lessons.emplace_back(
      before,
      torch::full({before.size(0), before.size(1)}, -1, before.options().dtype(torch::kLong)).scatter(1, chosen, 1));
}

torch::Tensor HtmModelImpl::timestep(int64_t depth) const {
  if (depth >= timesteps_.size(0)) throw Error("schedules deeper than 64 layers are not supported");
  return timesteps_[depth];
}

torch::Tensor HtmModelImpl::leaf_logits(const torch::Tensor& tokens) {
  return norm_mlp(tokens.detach(), leaf_head_);  // one MLP body (htm/layers.h)
}

ForwardResult HtmModelImpl::forward_teacher_forced(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                                   at::Generator generator, const ForwardHooks* hooks) {
  if (!unmerge_refine_) throw Error("a classifier has no decoder to teacher-force");
  ForwardResult result;
  auto x = lift(input);
  const int64_t depth = static_cast<int64_t>(schedule.size());
  result.decoder_tokens.resize(depth);
  auto truth = truth_for(input, hooks);
  for (int64_t d = 1; d <= depth; ++d) {
    x = enter(x, d, hooks);
    result.encoder_tokens.push_back(x);
    const int64_t T = x.size(1), r = schedule[d - 1];
    torch::Tensor attention, keep;
    auto h = mix_encoder(x, &attention);
    auto y = merge_layer(h, r, d, attention, generator, result, &keep, truth ? &*truth : nullptr, nullptr, hooks);
    result.populations.push_back(y);

    // The mirroring decoder layer, given the true population, unmerges the true merged tokens.
    const MirrorSplit mirror = mirror_of(keep, result.merges, T, r);
    result.decoder_tokens[d - 1] = reorder(decoder_layer(y, r, d, generator, result, mirror.forced), mirror.origin);
    x = y;
  }
  result.root = x;
  result.output = unlift(result.decoder_tokens[0]);
  return result;
}

torch::Tensor HtmModelImpl::first_merge_logits(const torch::Tensor& input, int64_t r) {
  auto x = lift(input) + timestep(1);
  torch::Tensor attention;
  x = mix_encoder(x, &attention);
  MergeContext ctx;
  ctx.tokens = x;
  ctx.r = r;
  ctx.attention = attention;
  ctx.cross_keys = merge_refine_->key_values(x).first;
  ctx.training = false;
  return policy().merge_logits(ctx);
}

torch::Tensor HtmModelImpl::reconstruction_error(const torch::Tensor& output, const torch::Tensor& input) {
  PluginScope scope(PluginKind::adapter, adapter_.get(), "reconstruction_error");
  return adapter_->reconstruction_error(output, input);
}

torch::Tensor HtmModelImpl::lift(const torch::Tensor& input) {
  PluginScope scope(PluginKind::adapter, adapter_.get(), "lift");
  return adapter_->lift(input);
}

torch::Tensor HtmModelImpl::unlift(const torch::Tensor& tokens) {
  PluginScope scope(PluginKind::adapter, adapter_.get(), "unlift");
  return adapter_->unlift(tokens);
}

std::optional<HtmModelImpl::Truth> HtmModelImpl::truth_for(const torch::Tensor& input, const ForwardHooks* hooks) {
  if (!policy().needs_truth()) return std::nullopt;
  if (hooks == nullptr || !hooks->tree.defined())
    throw Error(
        "this policy decides from the data's true hierarchy, and the dataset gives none "
        "(oracle policies are for data with a known tree, such as trees or crosses)");
  const auto& tree = hooks->tree;  // B×(N−1)×2
  const int64_t B = tree.size(0), N = tree.size(1) + 1;
  if (input.size(0) != B || num_tokens() != N)
    throw Error("the batch's tree has " + std::to_string(N) + " leaves, but the adapter makes " +
                std::to_string(num_tokens()) + " tokens: the truth cannot be followed");
  auto parent = torch::full({B, 2 * N - 1}, -1, tree.options().dtype(torch::kLong));
  auto internal = torch::arange(N, 2 * N - 1, tree.options().dtype(torch::kLong)).expand({B, N - 1});
  parent.scatter_(1, tree.select(2, 0), internal);
  parent.scatter_(1, tree.select(2, 1), internal);
  return Truth{torch::arange(N, tree.options().dtype(torch::kLong)).expand({B, N}).contiguous(), parent};
}

torch::Tensor total_log_prob(const ForwardResult& out, std::optional<Draw::Kind> only) {
  torch::Tensor sum;
  for (const Draw& d : out.draws)
    if (d.log_prob.defined() && (!only || d.kind == *only))
      sum = sum.defined() ? sum + d.log_prob.sum(1) : d.log_prob.sum(1);
  return sum;
}

torch::Tensor total_entropy(const ForwardResult& out) {
  torch::Tensor sum;
  for (const Draw& d : out.draws)
    if (d.entropy.defined()) sum = sum.defined() ? sum + d.entropy : d.entropy;
  return sum;
}

ForwardResult Model::forward_teacher_forced(const torch::Tensor&, const std::vector<int64_t>&, at::Generator,
                                            const ForwardHooks*) {
  throw Error("this model has no teacher-forced pass (§3.2.2 needs the HTM decoder)");
}

torch::Tensor Model::first_merge_logits(const torch::Tensor&, int64_t) { return {}; }

torch::Tensor Model::reconstruction_error(const torch::Tensor& output, const torch::Tensor& input) {
  return (output - input).pow(2).flatten(1).mean(1);
}

}  // namespace htm
