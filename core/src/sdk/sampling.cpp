// Pair and token samplers shared by the policies. Shapes: B batch, T tokens, r draws.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "htm/error.h"
#include "htm/greedy_pairs.h"
#include "htm/layers.h"
#include "htm/policy.h"
#include "kernels/fused_linear.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "kernels/portable.h"
#include "kernels/row_shard_scope.h"
#if HTM_NATIVE_KERNELS
#include "kernels/native/native.h"
#endif

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
  if (generator.has_value() && use_gpu(like)) return gpu::normal_like(like, *generator);  // drawn on like's device
  const DrawRows d = like.dim() > 0 ? draw_rows(like.size(0)) : DrawRows{0, 0};
  auto sizes = like.sizes().vec();
  // Drawn where the generator lives (a run's generators are CPU ones) and moved to like's device.
  const auto options = like.options().device(generator.has_value() ? generator->device() : like.device());
  if (sizes.empty() || d.rows == like.size(0)) return torch::randn(like.sizes(), generator, options).to(like.device());
  sizes[0] = d.rows;
  return torch::randn(sizes, generator, options).narrow(0, d.offset, like.size(0)).contiguous().to(like.device());
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
#if HTM_NATIVE_KERNELS
  if (use_native(values)) {
    // One stream per sample, seeded from `generator` in order: same draws for any thread count
    // (and any number of data-parallel processes: seeds are drawn for the whole batch).
    const DrawRows rows = draw_rows(logits.size(0));
    std::vector<uint64_t> seeds(rows.rows);
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      auto* gen = at::check_generator<at::CPUGeneratorImpl>(generator);
      for (auto& seed : seeds) seed = gen->random64();
    }
    seeds.erase(seeds.begin(), seeds.begin() + rows.offset);
    return native::sample_disjoint_pairs(values, r, seeds);
  }
#endif
  if (use_gpu(values)) return gpu::sample_disjoint_pairs(values, r, generator);
  return portable::sample_disjoint_pairs(values, r, generator);
}

std::pair<torch::Tensor, torch::Tensor> greedy_disjoint_pairs(const torch::Tensor& logits, int64_t r) {
  check_pairs_args(logits, r, "greedy_disjoint_pairs");
  torch::NoGradGuard no_grad;
  auto values = logits.detach().to(torch::kFloat);
  // No noise: the rounds' keys are the logits, and their ties go to the lower flat index, as the
  // scan's do.
  if (use_gpu(values)) return gpu::match_pairs(values, torch::zeros_like(values), r);
  return greedy_pairs(values, r);
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
  const auto step = [](const std::vector<int64_t>& t) {  // the step of an increasing arithmetic run, or 0
    const int64_t d = t.size() > 1 ? t[1] - t[0] : 1;
    for (size_t k = 1; k < t.size(); ++k)
      if (t[k] - t[k - 1] != d || d <= 0) return int64_t{0};
    return d;
  };
  const int64_t row_step = step(row_token), col_step = step(col_token);
  if (!use_gpu(values) || R == 0 || C == 0 || row_step == 0 || col_step == 0)
    return greedy_pairs(values, r, row_token, col_token, T);
  // The block, a strided view of a T×T of −∞ (never a pair while a finite one is left: r ≤
  // min(R, C) are), nothing copied from the host; its order by a·C + c is the flat index's.
  auto full = torch::full({values.size(0), T, T}, -std::numeric_limits<float>::infinity(), values.options());
  full.slice(1, row_token[0], row_token[0] + row_step * (R - 1) + 1, row_step)
      .slice(2, col_token[0], col_token[0] + col_step * (C - 1) + 1, col_step)
      .copy_(values);
  return gpu::match_pairs(full, torch::zeros_like(full), r);
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
  auto noise = use_gpu(scores) ? gpu::gumbel_like(scores, generator) : portable::gumbel_like(scores, generator);
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
  const auto eye = gpu::device_constant("diagonal", T, logits.device(),
                                        [&] { return torch::eye(T, logits.options().dtype(torch::kBool)); });
  return logits.masked_fill(eye, -std::numeric_limits<float>::infinity());
}

// B×r×T: whether token t is still free at draw k (not taken by any of `drawn`, each B×r, before
// it), or with `taken` the opposite, as `dtype` (1 or 0). From the draw that took each token (r
// where none did): a fill, a scatter each and a comparison, with no read back.
torch::Tensor free_at_draw(std::initializer_list<torch::Tensor> drawn, int64_t T, bool taken = false,
                           torch::ScalarType dtype = torch::kBool) {
  const torch::Tensor& first = *drawn.begin();
  const int64_t B = first.size(0), r = first.size(1);
  auto taken_at = torch::full({B, T}, r, first.options());
  const auto order = gpu::device_constant("draw order", r, first.device(),
                                          [&] { return torch::arange(r, first.options().dtype(torch::kLong)); });
  for (const auto& index : drawn) taken_at.scatter_(1, index, order.expand({B, r}));
  auto out = torch::empty({B, r, T}, first.options().dtype(dtype));
  return taken ? at::lt_out(out, taken_at.unsqueeze(1), order.view({1, r, 1}))
               : at::ge_out(out, taken_at.unsqueeze(1), order.view({1, r, 1}));
}

}  // namespace

torch::Tensor pair_log_prob(const torch::Tensor& logits, const torch::Tensor& src, const torch::Tensor& dst,
                            LogProbForm form, double logit_bound) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto masked = without_diagonal(bound_logits(logits, logit_bound));
  if (form == LogProbForm::paper)
    return torch::log_softmax(masked.view({B, T * T}), 1).gather(1, torch::add(dst, src, T));

  // On a GPU, forward and backward in one launch each (kernels/pair_log_prob.h), where built.
  if (use_gpu(masked))
    if (auto exact = gpu::exact_pair_log_prob(masked, src, dst); exact.defined()) return exact;
  // Draw k's normaliser is Σ over pairs (i, j) of unused tokens, i ≠ j, of exp(logit): with u_k
  // the unused-token indicator, u_kᵀ E u_k for E = exp(logits) with a zero diagonal — one batched
  // product, O(r·T²) per sample like the draw itself, never a B×r×T×T tensor. In double, shifted
  // by each sample's largest logit, so the later (smaller) normalisers keep their precision.
  auto top = std::get<0>(masked.detach().view({B, T * T}).max(1)).view({B, 1, 1});
  auto weights = (masked - top).to(torch::kDouble).exp();                    // B×T×T
  auto unused = free_at_draw({src, dst}, T, false, torch::kDouble);          // B×r×T
  auto normaliser = (torch::bmm(unused, weights) * unused).sum(2);           // B×r
  auto chosen = masked.view({B, T * T}).gather(1, torch::add(dst, src, T));  // src·T + dst
  return chosen - (normaliser.clamp_min(1e-300).log() + top.view({B, 1})).to(logits.scalar_type());
}

torch::Tensor token_log_prob(const torch::Tensor& scores, const torch::Tensor& index, LogProbForm form) {
  const int64_t T = scores.size(1), r = index.size(1);
  if (form == LogProbForm::paper) return torch::log_softmax(scores, 1).gather(1, index);
  if (r == T) return {};                                  // all T chosen: one outcome, nothing decided
  auto drawn = free_at_draw({index}, T, /*taken=*/true);  // B×r×T
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
  return torch::bmm(q.view({B, T, C}), keys.transpose(1, 2)) / std::sqrt(static_cast<double>(d));
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
  const int64_t B = logits.size(0), T = logits.size(1);
  const auto masked = without_diagonal(bound_logits(logits, logit_bound));
  if (use_gpu(masked))  // on a GPU, one launch each way (kernels/pair_log_prob.h), where built
    if (auto entropy = gpu::masked_pair_entropy(masked); entropy.defined()) return entropy;
  auto log_p = torch::log_softmax(masked.view({B, T * T}), 1);
  // 0·log 0 = 0 on the diagonal.
  return -(log_p.exp() * log_p.masked_fill(torch::isinf(log_p), 0)).sum(1);
}

}  // namespace htm
