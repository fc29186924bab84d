// Pair and token samplers shared by the policies. Shapes: B batch, T tokens, r draws.
#include <algorithm>
#include <numeric>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/policy.h"

namespace htm {
namespace {

// Gumbel(0,1) noise as -log(E), E ~ Exp(1): one draw per entry from `generator`.
torch::Tensor gumbel_like(const torch::Tensor& t, at::Generator generator) {
  auto e = torch::empty(t.sizes(), t.options().dtype(torch::kFloat)).exponential_(1.0, generator);
  return -e.log_();
}

void check_pairs_args(const torch::Tensor& logits, int64_t r) {
  if (logits.dim() != 3 || logits.size(1) != logits.size(2))
    throw Error("sample_disjoint_pairs: logits must be B×T×T");
  if (r < 0 || 2 * r > logits.size(1))
    throw Error("sample_disjoint_pairs: cannot draw " + std::to_string(r) +
                " disjoint pairs from " + std::to_string(logits.size(1)) + " tokens");
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs(const torch::Tensor& logits,
                                                              int64_t r, at::Generator generator) {
  check_pairs_args(logits, r);
  torch::NoGradGuard no_grad;
  const int64_t B = logits.size(0), T = logits.size(1);
  auto perturbed = logits.detach().to(torch::kFloat).contiguous() + gumbel_like(logits, generator);
  perturbed.diagonal(0, 1, 2).fill_(-std::numeric_limits<float>::infinity());
  auto src = torch::empty({B, r}, torch::kLong);
  auto dst = torch::empty({B, r}, torch::kLong);
  const float* keys_all = perturbed.data_ptr<float>();
  int64_t* src_all = src.data_ptr<int64_t>();
  int64_t* dst_all = dst.data_ptr<int64_t>();

  // Greedy scan in descending order of perturbed logits: the first pair whose tokens are both
  // unused is exactly a draw from the softmax renormalised over the allowed pairs (exponential
  // races are memoryless), so the accepted sequence has the one-pair-at-a-time distribution.
  // Partial sorting keeps it O(T² + k log k) while the accepted pairs lie in the first k.
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<int32_t> order(T * T);
    std::vector<char> used(T);
    for (int64_t b = begin; b < end; ++b) {
      const float* keys = keys_all + b * T * T;
      std::iota(order.begin(), order.end(), 0);
      auto desc = [keys](int32_t a, int32_t c) { return keys[a] > keys[c]; };
      std::fill(used.begin(), used.end(), 0);
      int64_t accepted = 0, scanned = 0, sorted = 0;
      int64_t chunk = std::min<int64_t>(T * T, std::max<int64_t>(64, 8 * r));
      while (accepted < r) {
        if (scanned == sorted) {
          int64_t next = std::min<int64_t>(T * T, sorted + chunk);
          std::partial_sort(order.begin() + sorted, order.begin() + next, order.end(), desc);
          sorted = next;
          chunk *= 2;
        }
        const int32_t flat = order[scanned++];
        const int32_t i = flat / T, j = flat % T;
        if (i == j || used[i] || used[j]) continue;
        used[i] = used[j] = 1;
        src_all[b * r + accepted] = i;
        dst_all[b * r + accepted] = j;
        ++accepted;
      }
    }
  });
  return {src, dst};
}

std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs_sequential(
    const torch::Tensor& logits, int64_t r, at::Generator generator) {
  check_pairs_args(logits, r);
  torch::NoGradGuard no_grad;
  const int64_t B = logits.size(0), T = logits.size(1);
  auto masked = logits.detach().to(torch::kFloat).clone();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  masked.diagonal(0, 1, 2).fill_(neg_inf);
  auto src = torch::empty({B, r}, torch::kLong);
  auto dst = torch::empty({B, r}, torch::kLong);
  for (int64_t k = 0; k < r; ++k) {
    auto probs = torch::softmax(masked.view({B, T * T}), 1);
    auto flat = torch::multinomial(probs, 1, false, generator).squeeze(1);
    auto i = flat.div(T, "floor"), j = flat.remainder(T);
    src.select(1, k).copy_(i);
    dst.select(1, k).copy_(j);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t : {i[b].item<int64_t>(), j[b].item<int64_t>()}) {
        masked[b].select(0, t).fill_(neg_inf);
        masked[b].select(1, t).fill_(neg_inf);
      }
    }
  }
  return {src, dst};
}

torch::Tensor sample_without_replacement(const torch::Tensor& scores, int64_t r,
                                         at::Generator generator) {
  if (scores.dim() != 2 || r < 0 || r > scores.size(1))
    throw Error("sample_without_replacement: need B×T scores and 0 ≤ r ≤ T");
  torch::NoGradGuard no_grad;
  auto perturbed = scores.detach().to(torch::kFloat) + gumbel_like(scores, generator);
  return std::get<1>(perturbed.topk(r, 1, /*largest=*/true, /*sorted=*/true));
}

torch::Tensor pair_log_prob(const torch::Tensor& logits, const torch::Tensor& src,
                            const torch::Tensor& dst) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto eye = torch::eye(T, logits.options().dtype(torch::kBool));
  auto masked = logits.masked_fill(eye, -std::numeric_limits<float>::infinity());
  auto log_p = torch::log_softmax(masked.view({B, T * T}), 1);
  return log_p.gather(1, src * T + dst);
}

}  // namespace htm
