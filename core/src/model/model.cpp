#include "model/model.h"

#include <cmath>
#include <utility>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "htm/error.h"
#include "model/plugin_calls.h"
#include "model/plugin_scope.h"

namespace htm {
namespace F = torch::nn::functional;

// ---------------------------------------------------------------------------------------------
// Blocks

TransformerBlockImpl::TransformerBlockImpl(const ModelOptions& o) : dropout_(o.dropout) {
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
  attn_ = register_module("attn", Attention(o.dim, o.heads, o.dropout));
  mlp_ = register_module("mlp", ResidualMlp(o.dim, o.mlp_ratio, o.dropout));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, torch::Tensor* attention) {
  auto h = norm_->forward(x);
  return mlp_->forward(x + fast_dropout(attn_->forward(h, h, attention), dropout_, is_training()));
}

RefineBlockImpl::RefineBlockImpl(const ModelOptions& o)
    : cross_attention_(o.refinement == Refinement::cross_attention), dropout_(o.dropout) {
  if (cross_attention_) {
    norm_q_ = register_module("norm_q", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
    norm_kv_ = register_module("norm_kv", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
    attn_ = register_module("attn", Attention(o.dim, o.heads, o.dropout));
  }
  mlp_ = register_module("mlp", ResidualMlp(o.dim, o.mlp_ratio, o.dropout));
}

std::pair<torch::Tensor, torch::Tensor> RefineBlockImpl::key_values(const torch::Tensor& old_tokens) {
  if (!cross_attention_) return {};
  return attn_->key_values(norm_kv_->forward(old_tokens));
}

torch::Tensor RefineBlockImpl::forward(const torch::Tensor& new_tokens, const torch::Tensor& keys,
                                       const torch::Tensor& values) {
  auto x = new_tokens;
  if (cross_attention_) x = x + fast_dropout(attn_->attend(norm_q_->forward(x), keys, values), dropout_, is_training());
  return mlp_->forward(x);
}

// ---------------------------------------------------------------------------------------------
// The model

namespace {

constexpr int64_t kMaxDepth = 64;

torch::Tensor sinusoids(int64_t depths, int64_t dim) {  // paper eq. 7
  auto d = torch::arange(depths, torch::kFloat).unsqueeze(1);
  auto i = torch::arange(0, dim, 2, torch::kFloat);
  auto angle = d / torch::pow(10000.0, i / static_cast<double>(dim));
  auto te = torch::zeros({depths, dim});
  te.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, dim, 2)}, torch::sin(angle));
  te.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, dim, 2)}, torch::cos(angle).narrow(1, 0, dim / 2));
  return te;
}

torch::Tensor gather_tokens(const torch::Tensor& x, const torch::Tensor& index) {
  return x.gather(1, index.unsqueeze(-1).expand({index.size(0), index.size(1), x.size(2)}));
}

// `merges` is ForwardResult::merges just after the layer: a layer that merged (r > 0) added its
// decision last.
MirrorSplit mirror_of(const torch::Tensor& keep, const std::vector<MergeDecision>& merges, int64_t T, int64_t r) {
  if (r == 0) return {{}, keep};
  const int64_t B = keep.size(0);
  auto position =
      torch::full({B, T}, -1, keep.options().dtype(torch::kLong));  // index before the merge → position after
  position.scatter_(1, keep, torch::arange(T - r, keep.options().dtype(torch::kLong)).expand({B, T - r}).contiguous());
  return {position.gather(1, merges.back().dst), torch::cat({keep, merges.back().src}, 1)};
}

// The decoded population put back in the order of the tokens before the merge.
torch::Tensor reorder(const torch::Tensor& z, const torch::Tensor& origin) {
  return torch::zeros_like(z).scatter(1, origin.unsqueeze(-1).expand_as(z), z);
}

}  // namespace

HtmModelImpl::HtmModelImpl(const ModelOptions& options, std::shared_ptr<Adapter> adapter,
                           std::shared_ptr<Policy> policy, std::shared_ptr<MergeOperator> merge)
    : options_(options) {
  adapter_ = register_module("adapter", std::move(adapter));
  policy_ = register_module("policy", std::move(policy));
  merge_ = register_module("merge", std::move(merge));
  const bool decoder = options_.classes == 0;
  if (options_.mixing == Mixing::transformer) {
    encoder_block_ = register_module("encoder_block", TransformerBlock(options_));
    if (decoder) decoder_block_ = register_module("decoder_block", TransformerBlock(options_));
  }
  merge_refine_ = register_module("merge_refine", RefineBlock(options_));
  if (decoder) {
    unmerge_refine_ = register_module("unmerge_refine", RefineBlock(options_));
  } else {
    head_norm_ = register_module("head_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options_.dim})));
    head_ = register_module("head", Linear(options_.dim, options_.classes));
  }
  if (options_.leaf_classifier == LeafClassifier::trained) {
    if (!decoder) throw Error("model.leaf_classifier needs the decoder: it is for reconstruction and generation");
    const int64_t C = options_.dim;
    leaf_head_ =
        register_module("leaf_head", torch::nn::Sequential(torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})),
                                                           Linear(C, C), torch::nn::GELU(), Linear(C, 2)));
  }
  timesteps_ = register_buffer("timesteps", options_.timestep_scale * sinusoids(kMaxDepth + 1, options_.dim));
}

torch::Tensor HtmModelImpl::leaf_logits(const torch::Tensor& tokens) { return leaf_head_->forward(tokens.detach()); }

torch::Tensor HtmModelImpl::timestep(int64_t depth) const {
  if (depth > kMaxDepth) throw Error("schedules deeper than 64 layers are not supported");
  return timesteps_[depth];
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
  MergeContext ctx;
  ctx.tokens = x;
  ctx.r = r;
  ctx.depth = depth;
  ctx.attention = attention;
  ctx.cross_keys = keys;
  ctx.generator = generator;
  ctx.training = is_training();
  ctx.log_prob_form = options_.log_prob_form;
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
    PluginScope scope(PluginKind::policy, &policy());
    if (replayed != nullptr) {  // a replayed draw: the policy scores the pairs given
      auto logits = policy().merge_logits(ctx);
      if (!logits.defined())
        throw Error("replaying merges (estimator.replay) needs a policy that gives its merge_logits()");
      decision = {replayed->src, replayed->dst,
                  pair_log_prob(logits, replayed->src, replayed->dst, ctx.log_prob_form, ctx.logit_bound)};
    } else {
      decision = policy().choose_merges(ctx);
    }
    const bool range = std::exchange(values_checked_[0], &policy()) != &policy();  // values: once per policy
    check_decision(decision.src, "merge decision's src", B, r, T, range);
    check_decision(decision.dst, "merge decision's dst", B, r, T, range);
    check_log_prob(decision.log_prob, "merge decision's log_prob", B, r);
  }
  Draw draw;
  draw.kind = Draw::Kind::merge;
  draw.depth = depth;
  draw.population = x;
  draw.src = decision.src;
  draw.dst = decision.dst;
  draw.log_prob = decision.log_prob;
  draw.entropy = decision.entropy;

  torch::Tensor merged;
  {
    PluginScope scope(PluginKind::merge, merge_.get());
    auto src = gather_tokens(x, decision.src), dst = gather_tokens(x, decision.dst);
    merged = merge_->merge(src.reshape({B * r, C}), dst.reshape({B * r, C}));
    check_tokens(merged, "merge operator's merge()", B * r, C);
    merged = merged.view({B, r, C});
    draw.merged = merged.detach();
    result.draws.push_back(std::move(draw));
    if (hooks != nullptr && hooks->merged) hooks->merged(*merge_, result.draws.back());
  }
  if (options_.merged_scale == MergedScale::probability && decision.log_prob.defined())
    merged = merged * decision.log_prob.exp().unsqueeze(-1);
  auto y = x.scatter(1, decision.dst.unsqueeze(-1).expand({B, r, C}), merged);
  // Drop the src tokens, keeping the others in their original order.
  auto order_key = torch::arange(T, x.options().dtype(torch::kLong)).expand({B, T}).clone();
  order_key.scatter_add_(1, decision.src, torch::full({B, r}, T, x.options().dtype(torch::kLong)));
  auto keep = std::get<1>(order_key.sort(1)).narrow(1, 0, T - r);
  if (keep_out != nullptr) *keep_out = keep;
  if (truth != nullptr) {  // a merge of true siblings is their parent; any other merge is no node
    auto src_parent = parent_of_node.gather(1, decision.src), dst_parent = parent_of_node.gather(1, decision.dst);
    auto merged_node = src_parent.masked_fill((src_parent != dst_parent) | (src_parent < 0), -1);
    truth->node = truth->node.scatter(1, decision.dst, merged_node).gather(1, keep);
  }
  result.merges.push_back(std::move(decision));
  return merge_refine_->forward(gather_tokens(y, keep), keys, values);
}

torch::Tensor HtmModelImpl::unmerge_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                                          ForwardResult& result, const torch::Tensor& forced, torch::Tensor* chosen) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto [keys, values] = unmerge_refine_->key_values(x);
  if (r == 0) return unmerge_refine_->forward(x, keys, values);
  UnmergeContext ctx;
  ctx.tokens = x;
  ctx.r = r;
  ctx.depth = depth;
  ctx.generator = generator;
  ctx.training = is_training();
  ctx.log_prob_form = options_.log_prob_form;
  ctx.forced = forced;
  UnmergeDecision decision;
  {
    PluginScope scope(PluginKind::policy, &policy());
    decision = policy().choose_unmerges(ctx);
    const bool range = std::exchange(values_checked_[1], &policy()) != &policy();
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
    Draw draw;
    draw.kind = Draw::Kind::unmerge;
    draw.depth = depth;
    draw.population = x;
    draw.index = decision.index;
    draw.log_prob = decision.log_prob;
    result.draws.push_back(std::move(draw));
  }

  if (chosen != nullptr) *chosen = decision.index;
  torch::Tensor first, second;
  {
    PluginScope scope(PluginKind::merge, merge_.get());
    std::tie(first, second) = merge_->unmerge(gather_tokens(x, decision.index).reshape({B * r, C}));
    check_tokens(first, "merge operator's unmerge() (first)", B * r, C);
    check_tokens(second, "merge operator's unmerge() (second)", B * r, C);
  }
  first = first.view({B, r, C}), second = second.view({B, r, C});
  if (options_.merged_scale == MergedScale::probability && decision.log_prob.defined()) {
    auto p = decision.log_prob.exp().unsqueeze(-1);
    first = first * p;
    second = second * p;
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
  if (options_.mixing != Mixing::transformer) return y;
  RECORD_FUNCTION("htm::decoder_block", {});
  return decoder_block_->forward(y);
}

torch::Tensor HtmModelImpl::first_merge_logits(const torch::Tensor& input, int64_t r) {
  auto x = lift(input) + timestep(1);
  torch::Tensor attention;
  if (options_.mixing == Mixing::transformer)
    x = encoder_block_->forward(x, policy().needs_attention() ? &attention : nullptr);
  MergeContext ctx;
  ctx.tokens = x;
  ctx.r = r;
  ctx.attention = attention;
  ctx.cross_keys = merge_refine_->key_values(x).first;
  ctx.training = false;
  return policy().merge_logits(ctx);
}

torch::Tensor HtmModelImpl::enter(const torch::Tensor& x, int64_t d, const ForwardHooks* hooks) {
  auto y = x + timestep(d);
  if (hooks != nullptr && hooks->layer_entry) y = hooks->layer_entry(y, d);
  return y;
}

torch::Tensor HtmModelImpl::decode(ForwardResult& result, torch::Tensor y, int64_t from,
                                   const std::vector<int64_t>& schedule, at::Generator generator, bool record,
                                   std::vector<std::pair<torch::Tensor, torch::Tensor>>* lessons) {
  for (int64_t d = from; d >= 1; --d) {
    const auto before = y;
    torch::Tensor chosen;
    const MirrorSplit* mirror = options_.unmerge == UnmergeChoice::mirror ? &result.mirrors[d - 1] : nullptr;
    y = decoder_layer(y, schedule[d - 1], d, generator, result, mirror ? mirror->forced : torch::Tensor(),
                      record && lessons != nullptr ? &chosen : nullptr);
    if (mirror) y = reorder(y, mirror->origin);
    if (!record) continue;
    if (chosen.defined())
      lessons->emplace_back(
          before, torch::full({y.size(0), before.size(1)}, -1, y.options().dtype(torch::kLong)).scatter(1, chosen, 1));
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

ForwardResult HtmModelImpl::forward(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                    at::Generator generator, const ForwardHooks* hooks) {
  ForwardResult result;
  torch::Tensor x;
  {
    RECORD_FUNCTION("htm::lift", {});
    x = lift(input);  // B×T×C
  }
  const int64_t B = x.size(0), depth = static_cast<int64_t>(schedule.size());
  // The leaf/internal classifier's lessons: populations (detached) with 0 = leaf, 1 = internal,
  // -1 = no label. The encoder's are labelled by where each token came from (slides).
  std::vector<std::pair<torch::Tensor, torch::Tensor>> lessons;
  torch::Tensor internal;
  if (has_leaf_classifier()) {
    internal = torch::zeros({B, x.size(1)}, x.options().dtype(torch::kLong));
    lessons.emplace_back(x, internal);
  }

  // Encoder: the same layer applied at every depth.
  const bool mirror = options_.unmerge == UnmergeChoice::mirror;
  auto truth = truth_for(input, hooks);
  const bool replay = hooks != nullptr && !hooks->merges.empty();
  if (replay && hooks->merges.size() != schedule.size())
    throw Error("a replayed draw has a decision for every layer run");
  for (int64_t d = 1; d <= depth; ++d) {
    x = enter(x, d, hooks);
    result.encoder_tokens.push_back(x);
    torch::Tensor attention, keep;
    if (options_.mixing == Mixing::transformer) {
      RECORD_FUNCTION("htm::encoder_block", {});
      x = encoder_block_->forward(x, policy().needs_attention() ? &attention : nullptr);
    }
    RECORD_FUNCTION("htm::merge_layer", {});
    const int64_t T = x.size(1);
    const bool need_keep = internal.defined() || mirror;
    x = merge_layer(x, schedule[d - 1], d, attention, generator, result, need_keep ? &keep : nullptr,
                    truth ? &*truth : nullptr, replay ? &hooks->merges[d - 1] : nullptr, hooks);
    if (mirror) result.mirrors.push_back(mirror_of(keep, result.merges, T, schedule[d - 1]));
    result.populations.push_back(x);
    if (internal.defined()) {
      if (schedule[d - 1] > 0) internal = internal.scatter(1, result.merges.back().dst, 1);
      internal = internal.gather(1, keep);
      lessons.emplace_back(x, internal);
    }
  }
  result.root = x;
  if (options_.classes > 0) {  // §4.1: encoder only, the root into a linear head
    result.output = head_->forward(head_norm_->forward(x.mean(1)));
    return result;
  }

  // Decoder: mirror image, same schedule and timestep signals. Its own populations teach the
  // classifier where the label is certain: tokens it splits are internal, its last are leaves.
  result.decoder_tokens.resize(depth);
  x = decode(result, x, depth, schedule, generator, true, internal.defined() ? &lessons : nullptr);
  if (hooks != nullptr && hooks->decoded) hooks->decoded(result);
  if (internal.defined()) {
    lessons.emplace_back(x, torch::zeros({B, x.size(1)}, x.options().dtype(torch::kLong)));
    std::vector<torch::Tensor> logits, targets;
    for (const auto& [tokens, labels] : lessons) {
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
      result.leaf_accuracy = hits.sum().item<double>() / std::max(1.0, labelled.sum().item<double>());
    }
  }
  RECORD_FUNCTION("htm::unlift", {});
  result.output = unlift(x);
  return result;
}

std::vector<torch::Tensor> HtmModelImpl::generate(const torch::Tensor& roots, const std::vector<int64_t>& schedule,
                                                  at::Generator generator, bool by_classifier, double leaf_threshold) {
  if (options_.classes > 0) throw Error("a classifier has no decoder to generate with");
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

torch::Tensor HtmModelImpl::reconstruction_error(const torch::Tensor& output, const torch::Tensor& input) {
  PluginScope scope(PluginKind::adapter, adapter_.get());
  return adapter_->reconstruction_error(output, input);
}

ForwardResult HtmModelImpl::forward_teacher_forced(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                                   at::Generator generator, const ForwardHooks* hooks) {
  if (options_.classes > 0) throw Error("a classifier has no decoder to teacher-force");
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
    auto h = x;
    if (options_.mixing == Mixing::transformer)
      h = encoder_block_->forward(x, policy().needs_attention() ? &attention : nullptr);
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
