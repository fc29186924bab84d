// The native pair sampler: per sample, an exponential race over the T×T pairs on the CPU
// threads, from its own SplitMix64 stream (NativeBackend::sample_disjoint_pairs draws the streams' seeds).
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "htm/row_shard.h"
#include "kernels/counter_rng.h"
#include "kernels/native/native.h"

namespace htm {
namespace {

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

std::pair<torch::Tensor, torch::Tensor> native::race_disjoint_pairs(const torch::Tensor& logits, int64_t r,
                                                                    const std::vector<uint64_t>& seeds) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto values = logits.contiguous();
  auto src = torch::empty({B, r}, torch::kLong);
  auto dst = torch::empty({B, r}, torch::kLong);
  const float* logits_all = values.data_ptr<float>();
  int64_t* src_all = src.data_ptr<int64_t>();
  int64_t* dst_all = dst.data_ptr<int64_t>();
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

std::pair<torch::Tensor, torch::Tensor> native::NativeBackend::sample_disjoint_pairs(const torch::Tensor& logits,
                                                                                     int64_t r,
                                                                                     at::Generator generator) const {
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
  return race_disjoint_pairs(logits, r, seeds);
}

}  // namespace htm
