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
#include "htm/layers.h"
#include "htm/policy.h"
#include "sdk/counter_rng.h"
#include "sdk/row_shard_scope.h"

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
  const DrawRows d = like.dim() > 0 ? draw_rows(like.size(0)) : DrawRows{0, 0};
  auto sizes = like.sizes().vec();
  if (sizes.empty() || d.rows == like.size(0)) return torch::randn(like.sizes(), generator, like.options());
  sizes[0] = d.rows;
  return torch::randn(sizes, generator, like.options()).narrow(0, d.offset, like.size(0)).contiguous();
}

RowShardScope::RowShardScope(RowShard shard) : previous_(g_row_shard) { g_row_shard = shard; }
RowShardScope::~RowShardScope() { g_row_shard = previous_; }

namespace {

// Gumbel(0,1) noise as -log(E), E ~ Exp(1): one draw per entry from `generator` (for the whole
// batch when data-parallel training split it: row_shard.h).
torch::Tensor gumbel_like(const torch::Tensor& t, at::Generator generator) {
  const DrawRows d = t.dim() > 0 ? draw_rows(t.size(0)) : DrawRows{0, 0};
  auto sizes = t.sizes().vec();
  if (!sizes.empty()) sizes[0] = d.rows;
  auto e = torch::empty(sizes, t.options().dtype(torch::kFloat)).exponential_(1.0, generator);
  if (!sizes.empty() && d.rows != t.size(0)) e = e.narrow(0, d.offset, t.size(0));
  return -e.log_();
}

// A small fast generator for the per-sample streams of the pair sampler.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_++); }
  float exponential() {  // -log U, U uniform on (0, 1) with 24 random bits
    return -std::log((static_cast<float>(next() >> 40) + 0.5f) * (1.0f / 16777216.0f));
  }

 private:
  uint64_t state_;
};

void check_pairs_args(const torch::Tensor& logits, int64_t r) {
  const bool square = logits.dim() == 3 && logits.size(1) == logits.size(2);
  if (!square) throw Error("sample_disjoint_pairs: logits must be B×T×T");
  if (r < 0 || 2 * r > logits.size(1))
    throw Error("sample_disjoint_pairs: cannot draw " + std::to_string(r) + " disjoint pairs from " +
                std::to_string(logits.size(1)) + " tokens");
}

// Rates are relative to the sample's best pair. Once every pair still allowed lies far below it
// (more than about 46 in logit), its float rate nears underflow: at 104 it is 0 and the round
// would draw uniformly. Such pairs are rescaled to the best of them, which leaves their race,
// and so the draw's distribution, as it was. Logits that span less never reach this, so their
// draws are unchanged to the bit.
void rescale_if_underflowing(const float* lg, int64_t T, const std::vector<int32_t>& unused, std::vector<float>& rate) {
  constexpr float kSmallest = 1e-20f;
  float round_top = 0, logit_top = -std::numeric_limits<float>::infinity();
  for (int32_t i : unused)
    for (int32_t j : unused)
      if (i != j) round_top = std::max(round_top, rate[i * T + j]), logit_top = std::max(logit_top, lg[i * T + j]);
  if (round_top >= kSmallest || !std::isfinite(logit_top)) return;
  for (int32_t i : unused)
    for (int32_t j : unused) rate[i * T + j] = std::exp(lg[i * T + j] - logit_top);
}

}  // namespace

torch::Tensor bound_logits(const torch::Tensor& logits, double bound) {
  return bound > 0 ? bound * torch::tanh(logits / bound) : logits;
}

std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs(const torch::Tensor& logits, int64_t r,
                                                              at::Generator generator, double logit_bound) {
  check_pairs_args(logits, r);
  torch::NoGradGuard no_grad;
  const int64_t B = logits.size(0), T = logits.size(1);
  auto values = bound_logits(logits.detach(), logit_bound).to(torch::kFloat).contiguous();
  auto src = torch::empty({B, r}, torch::kLong);
  auto dst = torch::empty({B, r}, torch::kLong);
  const float* logits_all = values.data_ptr<float>();
  int64_t* src_all = src.data_ptr<int64_t>();
  int64_t* dst_all = dst.data_ptr<int64_t>();
  // One stream per sample, seeded from `generator` in order: same draws for any thread count
  // (and any number of data-parallel processes: seeds are drawn for the whole batch).
  const DrawRows rows = draw_rows(B);
  std::vector<uint64_t> seeds(rows.rows);
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    auto* gen = at::check_generator<at::CPUGeneratorImpl>(generator);
    for (auto& seed : seeds) seed = gen->random64();
  }
  seeds.erase(seeds.begin(), seeds.begin() + rows.offset);

  // Greedy scan in descending order of Gumbel-perturbed logits: the first pair whose tokens are
  // both unused is a draw from the softmax renormalised over the allowed pairs (exponential
  // races are memoryless), so the accepted sequence has the one-pair-at-a-time distribution.
  // As a race, pair (i,j) arrives at E_ij / rate_ij with E ~ Exp(1), rate = exp(logit − max):
  // the same order as logit + Gumbel. Memorylessness lets a round stop at any fixed time τ —
  // no allowed pair has arrived after the scan, so the tokens still unused race afresh. τ is
  // set so about 4m of the m² candidates arrive before it: each round keeps and sorts only
  // those, making a draw O(T²) per sample with one logarithm per candidate.
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<float, int32_t>> arrivals;
    std::vector<float> rate(T * T);
    std::vector<int32_t> unused;
    std::vector<char> used(T);
    for (int64_t b = begin; b < end; ++b) {
      const float* lg = logits_all + b * T * T;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          if (i != j) top = std::max(top, lg[i * T + j]);
      for (int64_t n = 0; n < T * T; ++n) rate[n] = std::isfinite(top) ? std::exp(lg[n] - top) : 1.0f;
      SplitMix64 rng(seeds[b]);
      std::fill(used.begin(), used.end(), 0);
      int64_t accepted = 0;
      while (accepted < r) {
        unused.clear();
        for (int32_t t = 0; t < T; ++t)
          if (!used[t]) unused.push_back(t);
        rescale_if_underflowing(lg, T, unused, rate);
        double total_rate = 0;
        for (int32_t i : unused)
          for (int32_t j : unused)
            if (i != j) total_rate += rate[i * T + j];
        if (!(total_rate > 0))  // every allowed pair has probability 0: treat them as equal
          for (int32_t i : unused)
            for (int32_t j : unused) rate[i * T + j] = 1.0f, total_rate += 1.0;
        const float tau = static_cast<float>(4.0 * unused.size() / total_rate);
        arrivals.clear();
        for (int32_t i : unused)
          for (int32_t j : unused) {
            const float e = rng.exponential(), rt = rate[i * T + j];
            if (i != j && e < tau * rt) arrivals.emplace_back(e / rt, i * static_cast<int32_t>(T) + j);
          }
        std::sort(arrivals.begin(), arrivals.end(), [](const auto& a, const auto& c) { return a.first < c.first; });
        for (size_t n = 0; n < arrivals.size() && accepted < r; ++n) {
          const int32_t i = arrivals[n].second / T, j = arrivals[n].second % T;
          if (used[i] || used[j]) continue;
          used[i] = used[j] = 1;
          src_all[b * r + accepted] = i;
          dst_all[b * r + accepted] = j;
          ++accepted;
        }
      }
    }
  });
  return {src, dst};
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
    auto i = flat.div(T, "floor"), j = flat.remainder(T);
    src.select(1, k).copy_(i);
    dst.select(1, k).copy_(j);
    used.scatter_(1, i.unsqueeze(1), true);
    used.scatter_(1, j.unsqueeze(1), true);
  }
  return {src, dst};
}

torch::Tensor sample_without_replacement(const torch::Tensor& scores, int64_t r, at::Generator generator) {
  if (scores.dim() != 2 || r < 0 || r > scores.size(1))
    throw Error("sample_without_replacement: need B×T scores and 0 ≤ r ≤ T");
  torch::NoGradGuard no_grad;
  auto perturbed = scores.detach().to(torch::kFloat) + gumbel_like(scores, generator);
  return std::get<1>(perturbed.topk(r, 1, /*largest=*/true, /*sorted=*/true));
}

UnmergeScorerImpl::UnmergeScorerImpl(int64_t dim, int64_t hidden) {
  score_ = register_module("score", torch::nn::Sequential(torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})),
                                                          Linear(dim, hidden), torch::nn::GELU(), Linear(hidden, 1)));
}

UnmergeDecision UnmergeScorerImpl::choose(const UnmergeContext& ctx) {
  auto scores = score_->forward(ctx.tokens.detach()).squeeze(-1);  // B×T
  // Teacher forcing asks for the true tokens' log-probabilities as a cross-entropy target, each
  // under the softmax over all T: a supervised term, not a score function.
  if (ctx.forced.defined()) return {ctx.forced, torch::log_softmax(scores, 1).gather(1, ctx.forced)};
  auto index = sample_without_replacement(scores, ctx.r, ctx.generator);
  return {index, token_log_prob(scores, index, ctx.log_prob_form)};
}

UnmergeDecision uniform_unmerges(const UnmergeContext& ctx) {
  if (ctx.forced.defined()) return {ctx.forced, torch::Tensor()};
  auto scores = torch::zeros({ctx.tokens.size(0), ctx.tokens.size(1)});
  return {sample_without_replacement(scores, ctx.r, ctx.generator), torch::Tensor()};
}

namespace {

// The logits with the diagonal (a token merged into itself) at −∞.
torch::Tensor without_diagonal(const torch::Tensor& logits) {
  auto eye = torch::eye(logits.size(1), logits.options().dtype(torch::kBool));
  return logits.masked_fill(eye, -std::numeric_limits<float>::infinity());
}

// B×r×T: 1 where token t was drawn before draw k (by any of `drawn`, each B×r).
torch::Tensor drawn_before(std::initializer_list<torch::Tensor> drawn, int64_t T) {
  torch::Tensor now;
  for (const auto& index : drawn) {
    auto hot = torch::one_hot(index, T);
    now = now.defined() ? now + hot : hot;
  }
  return now.cumsum(1) - now;
}

}  // namespace

torch::Tensor pair_log_prob(const torch::Tensor& logits, const torch::Tensor& src, const torch::Tensor& dst,
                            LogProbForm form, double logit_bound) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto masked = without_diagonal(bound_logits(logits, logit_bound));
  if (form == LogProbForm::paper) return torch::log_softmax(masked.view({B, T * T}), 1).gather(1, src * T + dst);

  // Draw k's normaliser is Σ over pairs (i, j) of unused tokens, i ≠ j, of exp(logit): with u_k
  // the unused-token indicator, u_kᵀ E u_k for E = exp(logits) with a zero diagonal — one batched
  // product, O(r·T²) per sample like the draw itself, never a B×r×T×T tensor. In double, shifted
  // by each sample's largest logit, so the later (smaller) normalisers keep their precision.
  auto top = std::get<0>(masked.detach().view({B, T * T}).max(1)).view({B, 1, 1});
  auto weights = (masked - top).to(torch::kDouble).exp();              // B×T×T
  auto unused = 1.0 - drawn_before({src, dst}, T).to(torch::kDouble);  // B×r×T
  auto normaliser = (torch::bmm(unused, weights) * unused).sum(2);     // B×r
  auto chosen = masked.view({B, T * T}).gather(1, src * T + dst);
  return chosen - (normaliser.clamp_min(1e-300).log() + top.view({B, 1})).to(logits.scalar_type());
}

torch::Tensor token_log_prob(const torch::Tensor& scores, const torch::Tensor& index, LogProbForm form) {
  const int64_t T = scores.size(1), r = index.size(1);
  if (form == LogProbForm::paper) return torch::log_softmax(scores, 1).gather(1, index);
  if (r == T) return {};                                   // all T chosen: one outcome, nothing decided
  auto drawn = drawn_before({index}, T).to(torch::kBool);  // B×r×T
  auto normaliser =
      torch::logsumexp(scores.unsqueeze(1).masked_fill(drawn, -std::numeric_limits<float>::infinity()), 2);
  return scores.gather(1, index) - normaliser;
}

torch::Tensor bilinear_pair_logits(const torch::Tensor& x, Linear& query, Linear& key,
                                   const torch::Tensor& head_weight) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), heads = head_weight.size(0), d = C / heads;
  auto q = query->forward(x).view({B, T, heads, d}) * head_weight.view({1, 1, heads, 1});
  return torch::bmm(q.view({B, T, C}), key->forward(x).transpose(1, 2)) / std::sqrt(static_cast<double>(d));
}

torch::Tensor pair_entropy(const torch::Tensor& logits, double logit_bound) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto log_p = torch::log_softmax(without_diagonal(bound_logits(logits, logit_bound)).view({B, T * T}), 1);
  // 0·log 0 = 0 on the diagonal.
  return -(log_p.exp() * log_p.masked_fill(torch::isinf(log_p), 0)).sum(1);
}

}  // namespace htm
