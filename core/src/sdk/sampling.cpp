// Pair and token samplers shared by the policies. Shapes: B batch, T tokens, r draws.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/greedy_pairs.h"
#include "htm/layers.h"
#include "htm/policy.h"
#include "kernels/backend.h"
#include "kernels/fused_linear.h"
#include "kernels/graph_draws.h"
#include "kernels/portable.h"
#include "kernels/row_shard_scope.h"

namespace htm {

namespace {
thread_local RowShard g_row_shard;
}  // namespace

const RowShard& current_row_shard() { return g_row_shard; }

DrawRows draw_rows(int64_t rows) {
  const RowShard& s = g_row_shard;
  if (s.total == 0 || s.rows == 0 || rows == 0 || rows % s.rows != 0) return {rows, 0};
  const int64_t k = rows / s.rows;
  return {s.total * k, s.offset * k};
}

at::Tensor normal_like_rows(const at::Tensor& like, c10::optional<at::Generator> generator) {
  return backend_for(like).normal_like(like, generator);
}

RowShardScope::RowShardScope(RowShard shard) : previous_(g_row_shard) { g_row_shard = shard; }
RowShardScope::~RowShardScope() { g_row_shard = previous_; }

namespace {

void check_pairs_args(const torch::Tensor& logits, int64_t r, const char* what = "sample_disjoint_pairs") {
  const bool square = logits.dim() == 3 && logits.size(1) == logits.size(2);
  if (!square) throw Error(std::string(what) + ": logits must be B×T×T");
  if (r < 0 || 2 * r > logits.size(1))
    throw Error(std::string(what) + ": cannot draw " + std::to_string(r) + " disjoint pairs from " +
                std::to_string(logits.size(1)) + " tokens");
}

}  // namespace

torch::Tensor bound_logits(const torch::Tensor& logits, double bound) {
  return bound > 0 ? bound * torch::tanh(logits / bound) : logits;
}

std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs(const torch::Tensor& logits, int64_t r,
                                                              at::Generator generator, double logit_bound) {
  check_pairs_args(logits, r);
  torch::NoGradGuard no_grad;
  auto values = bound_logits(logits.detach(), logit_bound).to(torch::kFloat);
  return backend_for(values).sample_disjoint_pairs(values, r, generator);
}

std::pair<torch::Tensor, torch::Tensor> greedy_disjoint_pairs(const torch::Tensor& logits, int64_t r) {
  check_pairs_args(logits, r, "greedy_disjoint_pairs");
  torch::NoGradGuard no_grad;
  auto values = logits.detach().to(torch::kFloat);
  return backend_for(values).greedy_pairs(values, r);
}

std::pair<torch::Tensor, torch::Tensor> greedy_disjoint_pairs(const torch::Tensor& scores, int64_t r,
                                                              const std::vector<int64_t>& row_token,
                                                              const std::vector<int64_t>& col_token, int64_t T) {
  const int64_t R = static_cast<int64_t>(row_token.size()), C = static_cast<int64_t>(col_token.size());
  if (scores.dim() != 3 || scores.size(1) != R || scores.size(2) != C)
    throw Error("greedy_disjoint_pairs: scores must be B×" + std::to_string(R) + "×" + std::to_string(C) +
                " (the rows' and columns' tokens)");
  if (r < 0 || r > std::min(R, C))
    throw Error("greedy_disjoint_pairs: cannot take " + std::to_string(r) + " disjoint pairs from " +
                std::to_string(R) + " × " + std::to_string(C) + " tokens");
  torch::NoGradGuard no_grad;
  auto values = scores.detach().to(torch::kFloat);
  return backend_for(values).greedy_block_pairs(values, r, row_token, col_token, T);
}

std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs_sequential(const torch::Tensor& logits, int64_t r,
                                                                         at::Generator generator, double logit_bound) {
  check_pairs_args(logits, r);
  torch::NoGradGuard no_grad;
  const int64_t B = logits.size(0), T = logits.size(1);
  auto base = bound_logits(logits.detach(), logit_bound).to(torch::kFloat).clone();
  base.diagonal(0, 1, 2).fill_(-std::numeric_limits<float>::infinity());
  auto used = torch::zeros({B, T}, torch::kBool);
  auto src = torch::empty({B, r}, torch::kLong);
  auto dst = torch::empty({B, r}, torch::kLong);
  for (int64_t k = 0; k < r; ++k) {
    // Renormalise over the pairs whose tokens are both still unused, then draw one.
    auto blocked = used.unsqueeze(2).logical_or(used.unsqueeze(1));
    auto probs = torch::softmax(base.masked_fill(blocked, -std::numeric_limits<float>::infinity()).view({B, T * T}), 1);
    auto flat = torch::multinomial(probs, 1, false, generator).squeeze(1);
    portable::take_pairs(flat, k, src, dst, used);
  }
  return {src, dst};
}

torch::Tensor sample_without_replacement(const torch::Tensor& scores, int64_t r, at::Generator generator) {
  if (scores.dim() != 2 || r < 0 || r > scores.size(1))
    throw Error("sample_without_replacement: need B×T scores and 0 ≤ r ≤ T");
  torch::NoGradGuard no_grad;
  auto noise = backend_for(scores).gumbel_like(scores, generator);
  auto perturbed = scores.detach().to(torch::kFloat) + noise;
  return std::get<1>(perturbed.topk(r, 1, /*largest=*/true, /*sorted=*/true));
}

UnmergeScorerImpl::UnmergeScorerImpl(int64_t dim, int64_t hidden) {
  score_ = register_module("score", torch::nn::Sequential(torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})),
                                                          Linear(dim, hidden), torch::nn::GELU(), Linear(hidden, 1)));
}

UnmergeDecision UnmergeScorerImpl::choose(const UnmergeContext& ctx) {
  auto scores = norm_mlp(ctx.tokens.detach(), score_).squeeze(-1);  // B×T, one MLP body (htm/layers.h)
  // Teacher forcing asks for the true tokens' log-probabilities as a cross-entropy target, each
  // under the softmax over all T: a supervised term, not a score function.
  if (ctx.forced.defined()) return {ctx.forced, torch::log_softmax(scores, 1).gather(1, ctx.forced)};
  auto index = sample_without_replacement(scores, ctx.r, ctx.generator);
  return {index, token_log_prob(scores, index, ctx.log_prob_form)};
}

UnmergeDecision uniform_unmerges(const UnmergeContext& ctx) {
  if (ctx.forced.defined()) return {ctx.forced, torch::Tensor()};
  auto scores = ctx.tokens.new_zeros({ctx.tokens.size(0), ctx.tokens.size(1)});
  return {sample_without_replacement(scores, ctx.r, ctx.generator), torch::Tensor()};
}

namespace {

// The logits with the diagonal (a token merged into itself) at −∞.
torch::Tensor without_diagonal(const torch::Tensor& logits) {
  const int64_t T = logits.size(1);
  const auto eye = device_constant("diagonal", T, logits.device(),
                                   [&] { return torch::eye(T, logits.options().dtype(torch::kBool)); });
  return logits.masked_fill(eye, -std::numeric_limits<float>::infinity());
}

}  // namespace

torch::Tensor pair_log_prob(const torch::Tensor& logits, const torch::Tensor& src, const torch::Tensor& dst,
                            LogProbForm form, double logit_bound) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto masked = without_diagonal(bound_logits(logits, logit_bound));
  if (form == LogProbForm::paper)
    return torch::log_softmax(masked.view({B, T * T}), 1).gather(1, torch::add(dst, src, T));
  return backend_for(masked).pair_log_prob(masked, src, dst);
}

torch::Tensor token_log_prob(const torch::Tensor& scores, const torch::Tensor& index, LogProbForm form) {
  const int64_t T = scores.size(1), r = index.size(1);
  if (form == LogProbForm::paper) return torch::log_softmax(scores, 1).gather(1, index);
  if (r == T) return {};                                            // all T chosen: one outcome, nothing decided
  auto drawn = portable::free_at_draw({index}, T, /*taken=*/true);  // B×r×T
  auto normaliser =
      torch::logsumexp(scores.unsqueeze(1).masked_fill(drawn, -std::numeric_limits<float>::infinity()), 2);
  return scores.gather(1, index) - normaliser;
}

namespace {

// Σ_h w_h q_h·k_h / √d from the projected queries and keys (B×T×C each).
torch::Tensor bilinear_of(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& head_weight) {
  const int64_t B = queries.size(0), T = queries.size(1), C = queries.size(2), heads = head_weight.size(0);
  const int64_t d = C / heads;
  auto q = queries.view({B, T, heads, d}) * head_weight.view({1, 1, heads, 1});
  return backend_for(q).batched_product(q.view({B, T, C}), keys.transpose(1, 2)) / std::sqrt(static_cast<double>(d));
}

}  // namespace

torch::Tensor bilinear_pair_logits(const torch::Tensor& x, Linear& query, Linear& key,
                                   const torch::Tensor& head_weight) {
  return bilinear_of(query->forward(x), key->forward(x), head_weight);
}

torch::Tensor bilinear_pair_logits(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm, Linear& query,
                                   Linear& key, const torch::Tensor& head_weight) {
  auto [queries, keys] =
      norm_linear2(x, norm.weight, norm.bias, norm.options.eps(), query->weight, query->bias, key->weight, key->bias);
  return bilinear_of(queries, keys, head_weight);
}

torch::Tensor pair_entropy(const torch::Tensor& logits, double logit_bound) {
  const auto masked = without_diagonal(bound_logits(logits, logit_bound));
  return backend_for(masked).pair_entropy(masked);
}

}  // namespace htm
