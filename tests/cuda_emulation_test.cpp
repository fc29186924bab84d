// htm's CUDA kernels' own code (core/src/kernels/*.cu: their barriers, shuffles, shared memory
// and indexing, not only the header parts their CPU drivers share) run on the CPU by
// tests/cuda_emulation.h, against those drivers: the pair sampler's matching, the set
// assignment and the tokens a merge keeps index for index, the exact log-probability and entropy
// to rounding (their sums go in another order), and every kernel the same bits twice. On a GPU
// the kernels themselves are checked by CudaKernels.Matching*, DeviceAssignment.OnAGpu*,
// PairLogProbOnAGpu.* and KeptTokens.*.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_emulation.h"
#include "kernels/greedy_matching.h"
#include "kernels/kept_tokens.h"
#include "kernels/pair_log_prob.h"
#include "kernels/set_assignment.h"

// Each kernel file in a namespace of its own (their helpers are alike in name).
namespace emulated_matching {
#include "kernels/greedy_matching.cu"
}
namespace emulated_assignment {
#include "kernels/set_assignment.cu"
}
namespace emulated_log_prob {
#include "kernels/pair_log_prob.cu"
}
namespace emulated_kept {
#include "kernels/kept_tokens.cu"
}

namespace htm {
namespace {

using emulation::launch;

unsigned whole_warps(int64_t n) { return static_cast<unsigned>((n + 31) / 32 * 32); }

// Tokens 0 … T−1 in a random order.
std::vector<int64_t> shuffled(int64_t T, std::mt19937& rng) {
  std::vector<int64_t> tokens(T);
  std::iota(tokens.begin(), tokens.end(), 0);
  std::shuffle(tokens.begin(), tokens.end(), rng);
  return tokens;
}

TEST(CudaEmulation, TheMatchingKernelTakesTheDriversPairs) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform;
  // Sizes kept small: every shuffle is two barriers of 32 threads here (T = 64: two warps a block).
  for (int64_t T : {2, 5, 33, 64})
    for (bool ties : {false, true}) {
      const int64_t B = 2;
      std::vector<float> logits(B * T * T), noise(B * T * T);
      for (auto& x : logits) x = ties ? std::round(normal(rng) * 2) : normal(rng);
      for (auto& x : noise) x = ties ? std::round(uniform(rng) * 4) / 2 : -std::log(-std::log(uniform(rng) + 1e-12f));
      if (ties) std::fill(logits.begin(), logits.begin() + T * T, -std::numeric_limits<float>::infinity());
      for (int64_t r : T == 5 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{T / 2}) {
        std::vector<int64_t> src(B * r, -7), dst(B * r, -7), ranks(B * T * T), hs(B * r, -7), hd(B * r, -7),
            host_ranks(T * T);
        const unsigned threads = T >= 256 ? 256 : whole_warps(T);
        launch(B, threads, greedy::rows_bytes(T), emulated_matching::greedy_pairs_kernel, logits.data(), noise.data(),
               T, r, src.data(), dst.data(), ranks.data());
        std::vector<uint64_t> scratch((greedy::rows_bytes(T) + 7) / 8 + 1);
        greedy::match_on_host(logits.data(), noise.data(), B, T, r, hs.data(), hd.data(), scratch.data(),
                              host_ranks.data());
        ASSERT_EQ(src, hs) << "T " << T << " r " << r << " ties " << ties;
        ASSERT_EQ(dst, hd) << "T " << T << " r " << r << " ties " << ties;
      }
    }
}

TEST(CudaEmulation, TheAssignmentKernelTakesTheDriversAssignment) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> uniform(0, 10);
  for (int64_t N : {1, 2, 5, 9, 16})
    for (bool ties : {false, true}) {
      const int64_t B = 2, sets = int64_t{1} << N;
      std::vector<double> cost(B * N * N);
      for (auto& x : cost) x = ties ? std::floor(uniform(rng)) : uniform(rng);
      if (ties) cost[0] = std::numeric_limits<double>::infinity();
      std::vector<int64_t> out(B * N, -7), host(B * N, -7);
      std::vector<double> f(B * sets), hf(sets);
      std::vector<uint8_t> choice(B * sets), hchoice(sets);
      launch(B, sets >= 1024 ? 1024 : whole_warps(sets), N * N * sizeof(double), emulated_assignment::assignment_kernel,
             cost.data(), N, out.data(), f.data(), choice.data());
      assignment::assign_on_host(cost.data(), B, N, host.data(), hf.data(), hchoice.data());
      ASSERT_EQ(out, host) << "N " << N << " ties " << ties;
    }
}

TEST(CudaEmulation, TheKeptTokensKernelKeepsTheDriversTokens) {
  std::mt19937 rng(6);
  for (int64_t T : {1, 2, 9, 40, 100})
    for (int64_t r : {int64_t{0}, T / 2}) {
      const int64_t B = 3;
      std::vector<int64_t> src(B * r);
      for (int64_t b = 0; b < B; ++b) {
        const auto tokens = shuffled(T, rng);
        std::copy(tokens.begin(), tokens.begin() + r, src.begin() + b * r);
      }
      std::vector<int64_t> keep(B * (T - r), -7), host(B * (T - r), -7);
      std::vector<int32_t> flags(T);
      launch(B, whole_warps(T), T * sizeof(int32_t), emulated_kept::kept_kernel, src.data(), T, r, keep.data());
      keeping::kept_on_host(src.data(), B, T, r, host.data(), flags.data());
      ASSERT_EQ(keep, host) << "T " << T << " r " << r;
    }
}

double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i)
    most = std::max(most, std::abs(double{a[i]} - b[i]) / std::max(1.0, std::abs(double{b[i]})));
  return most;
}

TEST(CudaEmulation, TheLogProbabilityAndEntropyKernelsGiveTheDriversValuesTwiceAlike) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t T : {2, 7, 16, 33})
    for (int64_t r : {int64_t{1}, T / 2}) {
      const int64_t B = 3;
      std::vector<float> masked(B * T * T), g(B * r), gH(B);
      for (int64_t i = 0; i < B * T * T; ++i) masked[i] = (i / T) % T == i % T ? -inf : normal(rng) * 3;
      masked[1] = -inf;  // a hole off the diagonal (T ≥ 2)
      for (auto& x : g) x = normal(rng);
      for (auto& x : gH) x = normal(rng);
      std::vector<int64_t> src(B * r), dst(B * r);
      for (int64_t b = 0; b < B; ++b) {  // r disjoint pairs a sample
        const auto tokens = shuffled(T, rng);
        for (int64_t k = 0; k < r; ++k) src[b * r + k] = tokens[2 * k], dst[b * r + k] = tokens[2 * k + 1];
      }
      const unsigned threads = static_cast<unsigned>(emulated_log_prob::threads_for(T));
      auto on_kernels = [&] {
        std::vector<float> out(B * r), top(B), grad(B * T * T), H(B), etop(B), egrad(B * T * T);
        std::vector<double> Z(B * r), sums(2 * B);
        launch(B, threads, (threads + r + 1) * sizeof(double) + T * sizeof(int32_t), emulated_log_prob::forward_kernel,
               masked.data(), src.data(), dst.data(), T, r, out.data(), Z.data(), top.data());
        launch(B, threads, (r + 1) * sizeof(double) + T * sizeof(int32_t), emulated_log_prob::backward_kernel, g.data(),
               masked.data(), src.data(), dst.data(), Z.data(), top.data(), T, r, grad.data());
        launch(B, threads, threads * sizeof(double), emulated_log_prob::entropy_kernel, masked.data(), T, H.data(),
               sums.data(), etop.data());
        launch(B, threads, 0, emulated_log_prob::entropy_backward_kernel, gH.data(), masked.data(), sums.data(),
               etop.data(), T, egrad.data());
        return std::vector<std::vector<float>>{out, grad, H, egrad};
      };
      const auto once = on_kernels(), twice = on_kernels();
      for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(once[i], twice[i]) << "output " << i << " T " << T;
      // The drivers.
      std::vector<float> out(B * r), top(B), grad(B * T * T), H(B), etop(B), egrad(B * T * T);
      std::vector<double> Z(B * r), sums(2 * B), scratch(r + 1);
      std::vector<int32_t> taken(T);
      logprob::log_prob_on_host(masked.data(), src.data(), dst.data(), B, T, r, out.data(), Z.data(), top.data(),
                                taken.data(), scratch.data());
      logprob::grad_on_host(g.data(), masked.data(), src.data(), dst.data(), Z.data(), top.data(), B, T, r, grad.data(),
                            taken.data(), scratch.data());
      logprob::entropy_on_host(masked.data(), B, T, H.data(), sums.data(), etop.data());
      logprob::entropy_grad_on_host(gH.data(), masked.data(), sums.data(), etop.data(), B, T, egrad.data());
      EXPECT_LT(worst(once[0], out), 1e-6) << "log p, T " << T << " r " << r;
      EXPECT_LT(worst(once[1], grad), 1e-6) << "its gradient, T " << T << " r " << r;
      EXPECT_LT(worst(once[2], H), 1e-6) << "entropy, T " << T;
      EXPECT_LT(worst(once[3], egrad), 1e-6) << "its gradient, T " << T;
    }
}

}  // namespace
}  // namespace htm
