// The CUDA pair sampler's phases (kernels/greedy_matching.h) run on the CPU one row after another
// (greedy::match_on_host): the pairs, in the order, of gpu::match_pairs' rounds in torch ops from
// the same logits and noise, ties and −∞ included. On a GPU, CudaKernels.MatchingOnTheGpuTakesTheCpuPairs
// checks the kernel itself (scripts/gpu/check.sh).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "config/device.h"
#include "kernels/gpu.h"
#include "kernels/greedy_matching.h"
#include "kernels/kept_tokens.h"

namespace htm {
namespace {

// The kernel's answer for CPU tensors, through the host driver of its phases; lanes: a row's
// share-out, as a warp's 32 lanes (any other count gives the same bests).
std::pair<torch::Tensor, torch::Tensor> on_host(const torch::Tensor& logits, const torch::Tensor& noise, int64_t r,
                                                int64_t* rounds = nullptr, int64_t lanes = 32) {
  const int64_t B = logits.size(0), T = logits.size(1);
  auto l = logits.contiguous(), n = noise.contiguous();
  auto src = torch::full({B, r}, -7, torch::kLong), dst = torch::full({B, r}, -7, torch::kLong);
  std::vector<uint64_t> scratch((greedy::rows_bytes(T) + 7) / 8 + 1);
  std::vector<int64_t> ranks(T * T);
  const int64_t most = greedy::match_on_host(l.data_ptr<float>(), n.data_ptr<float>(), B, T, r, src.data_ptr<int64_t>(),
                                             dst.data_ptr<int64_t>(), scratch.data(), ranks.data(), lanes);
  if (rounds != nullptr) *rounds = most;
  return {src, dst};
}

// Logits with −∞ entries and ties, noise with ties (kernels_test.cpp's hard case), or continuous
// Gumbel noise as drawn.
std::pair<torch::Tensor, torch::Tensor> keys(int64_t B, int64_t T, int64_t seed, bool hard) {
  torch::manual_seed(seed);
  const float inf = std::numeric_limits<float>::infinity();
  auto logits = (torch::randn({B, T, T}) * 2).round();
  logits.masked_fill_(torch::rand({B, T, T}) < 0.2, -inf);
  if (B > 1) logits[0].fill_(-inf);  // a sample all −∞: noise decides
  auto noise = hard ? ((torch::rand({B, T, T}) * 4).round() / 2).masked_fill_(torch::rand({B, T, T}) < 0.5, 0.0)
                    : -torch::empty({B, T, T}).exponential_().log();
  if (hard) noise[B - 1][0].fill_(-0.0);  // −0 and +0: equal keys
  return {logits, noise};
}

TEST(GreedyMatching, ThePhasesTakeMatchPairsPairsInItsOrder) {
  for (int64_t T : {1, 2, 3, 4, 7, 16, 33, 64})
    for (int64_t seed = 0; seed < 4; ++seed) {
      auto [logits, noise] = keys(5, T, seed, seed % 2 == 0);
      for (int64_t r : {int64_t{0}, std::min<int64_t>(1, T / 2), T / 2}) {  // at most ⌊T/2⌋ pairs
        auto [gs, gd] = gpu::match_pairs(logits, noise, r);
        for (int64_t lanes : {1, 3, 32}) {
          auto [ks, kd] = on_host(logits, noise, r, nullptr, lanes);
          ASSERT_TRUE(torch::equal(ks, gs) && torch::equal(kd, gd))
              << "T " << T << " seed " << seed << " r " << r << " lanes " << lanes;
        }
      }
    }
}

TEST(GreedyMatching, RoundsEndWhenTheMatchingIsWholeAtThePaperSize) {
  // T = 256, r = 128: as many rounds as match_pairs' early stop needs, plus the one that finds
  // nothing left.
  torch::manual_seed(3);
  auto logits = torch::randn({4, 256, 256});
  auto noise = -torch::empty({4, 256, 256}).exponential_().log();
  int64_t kernel_rounds = 0, torch_rounds = 0;
  auto [ks, kd] = on_host(logits, noise, 128, &kernel_rounds);
  auto [gs, gd] = gpu::match_pairs(logits, noise, 128, &torch_rounds);
  EXPECT_TRUE(torch::equal(ks, gs) && torch::equal(kd, gd));
  EXPECT_GT(kernel_rounds, 1);
  EXPECT_LE(kernel_rounds, torch_rounds + 1);
}

TEST(GreedyMatching, PairRanksFollowTheKeyThenTheFlatIndex) {
  const int64_t T = 5;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_GT(greedy::pair_rank(1.0f, 0.0f, 0, 1, T), greedy::pair_rank(0.5f, 0.0f, 0, 2, T));
  EXPECT_GT(greedy::pair_rank(0.5f, 0.0f, 0, 1, T), greedy::pair_rank(0.5f, 0.0f, 0, 2, T));  // lower index
  EXPECT_EQ(greedy::pair_rank(-0.0f, 0.0f, 1, 2, T), greedy::pair_rank(0.0f, 0.0f, 1, 2, T));
  EXPECT_GT(greedy::pair_rank(-1e30f, 0.0f, 3, 4, T), greedy::pair_rank(-inf, 5.0f, 0, 1, T));  // finite first
  EXPECT_GT(greedy::pair_rank(-inf, 5.0f, 3, 4, T), greedy::pair_rank(-inf, 4.0f, 0, 1, T));    // then noise
  EXPECT_LT(greedy::pair_rank(9.0f, 9.0f, 2, 2, T), 0);  // one token: below every pair
  EXPECT_GE(greedy::pair_rank(-inf, -inf, 4, 3, T), 0);  // every pair of two tokens ranks ≥ 0
}

// The tokens a merge keeps (kernels/kept_tokens.h's driver, the kernel's parts) against the torch
// ops the encoder runs elsewhere: every token but the sources, in order. On a GPU, gpu::kept_tokens
// (the kernel, where built) against the same.
TEST(KeptTokens, TheKernelsPartsKeepWhatTheSortKeeps) {
  torch::manual_seed(8);
  for (int64_t T : {1, 2, 7, 16, 64, 256})
    for (int64_t r : {int64_t{0}, int64_t{1}, T / 2}) {
      if (r > T / 2) continue;
      const int64_t B = 4;
      const auto src = std::get<1>(torch::rand({B, T}).sort(1)).narrow(1, 0, r).contiguous();
      auto order_key = torch::arange(T, torch::kLong).expand({B, T}).clone();
      order_key.scatter_add_(1, src, torch::full({B, r}, T, torch::kLong));
      const auto by_sort = std::get<1>(order_key.sort(1)).narrow(1, 0, T - r);
      auto keep = torch::full({B, T - r}, -7, torch::kLong);
      std::vector<int32_t> flags(T);
      keeping::kept_on_host(src.data_ptr<int64_t>(), B, T, r, keep.data_ptr<int64_t>(), flags.data());
      ASSERT_TRUE(torch::equal(keep, by_sort)) << "T " << T << " r " << r;
      if (cuda_usable()) {
        const auto on_gpu = gpu::kept_tokens(src.cuda(), T);
        if (on_gpu.defined()) EXPECT_TRUE(torch::equal(on_gpu.cpu(), by_sort)) << "T " << T << " r " << r;
      }
    }
  EXPECT_FALSE(gpu::kept_tokens(torch::zeros({2, 1}, torch::kLong), 4).defined());  // a CPU tensor: the torch ops
}

}  // namespace
}  // namespace htm
