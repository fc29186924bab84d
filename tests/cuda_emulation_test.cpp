// htm's CUDA kernels' own code (core/src/kernels/*.cu: their barriers, shuffles, shared memory
// and indexing, not only the header parts their CPU drivers share) run on the CPU by
// tests/cuda_emulation.h, against those drivers: the pair sampler's matching, the set
// assignment and the tokens a merge keeps index for index, the exact log-probability and entropy
// to rounding (their sums go in another order), and every kernel the same bits twice. Each case
// runs under three schedules (tests/cuda_emulation.h): free, and two drawn ones, each with its own
// order of the threads between barriers and its own bytes in shared memory at the start, so a race
// or a read of shared memory never written shows as another result (EmulatedSchedules.* shows
// both do); the drawn ones, quicker, at the paper's first layer (T = 256) too. Every output lies
// between guard bands (a write past it fails the case). On a GPU the kernels themselves are
// checked by CudaKernels.Matching*, DeviceAssignment.OnAGpu*, PairLogProbOnAGpu.* and KeptTokens.*.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

// Two kernels with a fault each that the checks above are for. Each thread writes its slot of
// shared memory and reads its neighbour's: `wait` = 0 leaves out the barrier between the two (a
// race); `skip` = 1 leaves the last thread's slot unwritten (a read of memory never written).
namespace faulty {
__global__ void neighbours_kernel(int32_t* out, int wait, int skip) {
  HTM_SHARED(shared);
  auto* slot = reinterpret_cast<int32_t*>(shared);
  const unsigned t = threadIdx.x, n = blockDim.x;
  if (!(skip && t == n - 1)) slot[t] = static_cast<int32_t>(t) + 1;
  if (wait) __syncthreads();
  out[blockIdx.x * n + t] = slot[(t + 1) % n];
}
// A thread that leaves before a barrier the others wait at: undefined on a GPU (a hang where the
// barrier counts it), named by a drawn schedule instead of hanging the test.
__global__ void early_exit_kernel() {
  if (threadIdx.x == 0) return;
  __syncthreads();
}
}  // namespace faulty

namespace htm {
namespace {

using emulation::launch;

// Each case under one schedule: free, or drawn with its fill.
class CudaEmulation : public ::testing::TestWithParam<emulation::Schedule> {
 protected:
  void SetUp() override { emulation::schedule = GetParam(); }
  void TearDown() override { emulation::schedule = {}; }
  // The sizes a case runs at; the first drawn schedule, quicker than the free one, also at the
  // paper's first layer (T = 256: 256 threads, 8 warps; 15 s a schedule here, so once).
  std::vector<int64_t> sizes(std::vector<int64_t> small) const {
    if (GetParam().seed == 1) small.push_back(256);
    return small;
  }
};
INSTANTIATE_TEST_SUITE_P(Free, CudaEmulation, ::testing::Values(emulation::Schedule{}));
INSTANTIATE_TEST_SUITE_P(Drawn, CudaEmulation,
                         ::testing::Values(emulation::Schedule{1, 0xff}, emulation::Schedule{2, 0x7f}));

unsigned whole_warps(int64_t n) { return static_cast<unsigned>((n + 31) / 32 * 32); }

// A kernel's output between two guard bands (each as long as it, at least 256 elements) of a byte
// the checks' outputs never hold: a write past either end shows as a guard changed, where it
// would corrupt the heap the test program trips on later.
template <class T>
class Guarded {
 public:
  explicit Guarded(size_t n, T value = T{}) : n_(n), pad_(std::max<size_t>(n, 256)), all_(n + 2 * pad_) {
    std::memset(all_.data(), kGuard, all_.size() * sizeof(T));
    std::fill_n(data(), n, value);
  }
  T* data() { return all_.data() + pad_; }
  std::vector<T> values() const { return {all_.begin() + pad_, all_.begin() + pad_ + n_}; }
  bool intact() const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(all_.data());
    const auto guard = [](unsigned char b) { return b == kGuard; };
    const size_t band = pad_ * sizeof(T), after = (pad_ + n_) * sizeof(T);
    return std::all_of(bytes, bytes + band, guard) && std::all_of(bytes + after, bytes + after + band, guard);
  }

 private:
  static constexpr unsigned char kGuard = 0xa5;
  size_t n_, pad_;
  std::vector<T> all_;
};

// Tokens 0 … T−1 in a random order.
std::vector<int64_t> shuffled(int64_t T, std::mt19937& rng) {
  std::vector<int64_t> tokens(T);
  std::iota(tokens.begin(), tokens.end(), 0);
  std::shuffle(tokens.begin(), tokens.end(), rng);
  return tokens;
}

TEST_P(CudaEmulation, TheMatchingKernelTakesTheDriversPairs) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform;
  // Sizes kept small: every shuffle is two barriers of 32 threads here (T = 64: two warps a block).
  for (int64_t T : sizes({2, 5, 33, 64}))
    for (bool ties : {false, true}) {
      const int64_t B = 2;
      std::vector<float> logits(B * T * T), noise(B * T * T);
      for (auto& x : logits) x = ties ? std::round(normal(rng) * 2) : normal(rng);
      for (auto& x : noise) x = ties ? std::round(uniform(rng) * 4) / 2 : -std::log(-std::log(uniform(rng) + 1e-12f));
      if (ties) std::fill(logits.begin(), logits.begin() + T * T, -std::numeric_limits<float>::infinity());
      for (int64_t r : T == 5 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{T / 2}) {
        Guarded<int64_t> src(B * r, -7), dst(B * r, -7), ranks(B * T * T);
        std::vector<int64_t> hs(B * r, -7), hd(B * r, -7), host_ranks(T * T);
        const unsigned threads = T >= 256 ? 256 : whole_warps(T);
        launch(B, threads, greedy::rows_bytes(T), emulated_matching::greedy_pairs_kernel, logits.data(), noise.data(),
               T, r, src.data(), dst.data(), ranks.data());
        std::vector<uint64_t> scratch((greedy::rows_bytes(T) + 7) / 8 + 1);
        greedy::match_on_host(logits.data(), noise.data(), B, T, r, hs.data(), hd.data(), scratch.data(),
                              host_ranks.data());
        ASSERT_TRUE(src.intact() && dst.intact() && ranks.intact()) << "a write past an output, T " << T;
        ASSERT_EQ(src.values(), hs) << "T " << T << " r " << r << " ties " << ties;
        ASSERT_EQ(dst.values(), hd) << "T " << T << " r " << r << " ties " << ties;
      }
    }
}

TEST_P(CudaEmulation, TheAssignmentKernelTakesTheDriversAssignment) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> uniform(0, 10);
  for (int64_t N : {1, 2, 5, 9, 16})
    for (bool ties : {false, true}) {
      const int64_t B = 2, sets = int64_t{1} << N;
      std::vector<double> cost(B * N * N);
      for (auto& x : cost) x = ties ? std::floor(uniform(rng)) : uniform(rng);
      if (ties) cost[0] = std::numeric_limits<double>::infinity();
      Guarded<int64_t> out(B * N, -7);
      Guarded<double> f(B * sets);
      Guarded<uint8_t> choice(B * sets);
      std::vector<int64_t> host(B * N, -7);
      std::vector<double> hf(sets);
      std::vector<uint8_t> hchoice(sets);
      launch(B, sets >= 1024 ? 1024 : whole_warps(sets), N * N * sizeof(double), emulated_assignment::assignment_kernel,
             cost.data(), N, out.data(), f.data(), choice.data());
      assignment::assign_on_host(cost.data(), B, N, host.data(), hf.data(), hchoice.data());
      ASSERT_TRUE(out.intact() && f.intact() && choice.intact()) << "a write past an output, N " << N;
      ASSERT_EQ(out.values(), host) << "N " << N << " ties " << ties;
    }
}

TEST_P(CudaEmulation, TheKeptTokensKernelKeepsTheDriversTokens) {
  std::mt19937 rng(6);
  for (int64_t T : sizes({1, 2, 9, 40, 100}))
    for (int64_t r : {int64_t{0}, T / 2}) {
      const int64_t B = 3;
      std::vector<int64_t> src(B * r);
      for (int64_t b = 0; b < B; ++b) {
        const auto tokens = shuffled(T, rng);
        std::copy(tokens.begin(), tokens.begin() + r, src.begin() + b * r);
      }
      Guarded<int64_t> keep(B * (T - r), -7);
      std::vector<int64_t> host(B * (T - r), -7);
      std::vector<int32_t> flags(T);
      launch(B, whole_warps(T), T * sizeof(int32_t), emulated_kept::kept_kernel, src.data(), T, r, keep.data());
      keeping::kept_on_host(src.data(), B, T, r, host.data(), flags.data());
      ASSERT_TRUE(keep.intact()) << "a write past the output, T " << T << " r " << r;
      ASSERT_EQ(keep.values(), host) << "T " << T << " r " << r;
    }
}

double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i)
    most = std::max(most, std::abs(double{a[i]} - b[i]) / std::max(1.0, std::abs(double{b[i]})));
  return most;
}

TEST_P(CudaEmulation, TheLogProbabilityAndEntropyKernelsGiveTheDriversValuesTwiceAlike) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t T : sizes({2, 7, 16, 33}))
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
        Guarded<float> out(B * r), top(B), grad(B * T * T), H(B), etop(B), egrad(B * T * T);
        Guarded<double> Z(B * r), sums(2 * B);
        launch(B, threads, (threads + r + 1) * sizeof(double) + T * sizeof(int32_t), emulated_log_prob::forward_kernel,
               masked.data(), src.data(), dst.data(), T, r, out.data(), Z.data(), top.data());
        launch(B, threads, (r + 1) * sizeof(double) + T * sizeof(int32_t), emulated_log_prob::backward_kernel, g.data(),
               masked.data(), src.data(), dst.data(), Z.data(), top.data(), T, r, grad.data());
        launch(B, threads, threads * sizeof(double), emulated_log_prob::entropy_kernel, masked.data(), T, H.data(),
               sums.data(), etop.data());
        launch(B, threads, 0, emulated_log_prob::entropy_backward_kernel, gH.data(), masked.data(), sums.data(),
               etop.data(), T, egrad.data());
        EXPECT_TRUE(out.intact() && top.intact() && grad.intact() && H.intact() && etop.intact() && egrad.intact() &&
                    Z.intact() && sums.intact())
            << "a write past an output, T " << T << " r " << r;
        return std::vector<std::vector<float>>{out.values(), grad.values(), H.values(), egrad.values()};
      };
      // Twice under a drawn schedule, the second time in another order of the threads (the free
      // schedule's order is the operating system's: a second launch there adds little, and 9 s).
      const auto once = on_kernels();
      if (GetParam().seed) {
        emulation::schedule.seed = GetParam().seed + 100;
        const auto twice = on_kernels();
        emulation::schedule = GetParam();
        for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(once[i], twice[i]) << "output " << i << " T " << T;
      }
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

std::vector<int32_t> neighbours(emulation::Schedule schedule, int wait, int skip) {
  emulation::schedule = schedule;
  std::vector<int32_t> out(2 * 64, -7);
  emulation::launch(2, 64, 64 * sizeof(int32_t), faulty::neighbours_kernel, out.data(), wait, skip);
  emulation::schedule = {};
  return out;
}

TEST(EmulatedSchedules, DrawnOrdersShowARaceThatTheBarrierRemoves) {
  std::vector<int32_t> right(2 * 64);
  for (int t = 0; t < 2 * 64; ++t) right[t] = (t % 64 + 1) % 64 + 1;
  int wrong = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    EXPECT_EQ(neighbours({seed, 0}, 1, 0), right) << "with the barrier, seed " << seed;
    wrong += neighbours({seed, 0}, 0, 0) != right;
  }
  EXPECT_GE(wrong, 3) << "without it, the drawn orders read slots before their threads wrote them";
  EXPECT_NE(neighbours({1, 0}, 0, 0), neighbours({2, 0}, 0, 0)) << "and each order its own";
}

TEST(EmulatedSchedules, AFillShowsAReadOfSharedMemoryNeverWritten) {
  auto zeros = neighbours({1, 0x00}, 1, 1), ones = neighbours({1, 0xff}, 1, 1);
  for (int at : {62, 64 + 62}) {  // each block's thread 62 reads the slot of 63, which wrote none
    EXPECT_EQ(zeros[at], 0);
    EXPECT_EQ(ones[at], -1);
    zeros[at] = ones[at] = 0;
  }
  EXPECT_EQ(zeros, ones) << "the words written read alike";
}

void early_exit_under_a_drawn_schedule() {
  emulation::schedule.seed = 1;
  emulation::launch(1, 32, 0, faulty::early_exit_kernel);
}

TEST(EmulatedSchedules, ABarrierAThreadNeverReachesIsNamedNotAHang) {
  EXPECT_DEATH(early_exit_under_a_drawn_schedule(), "emulated block deadlocked");
}

}  // namespace
}  // namespace htm
