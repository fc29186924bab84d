// The pair sampler's greedy matching (gpu::match_pairs) for one CUDA block a sample
// (greedy_matching.cu): the pairs' ranks and each phase of a round, written once for the device
// kernel and for the CPU (match_on_host: the same phases, one row after another), where the tests
// check them against match_pairs' rounds in torch ops. Header-only, no torch: nvcc compiles it
// without torch's headers.
//
// A round: every unmatched token finds its best unmatched partner (partial_best over a warp's
// lanes, combined by `better`), then each
// mutual choice is matched (take_mutual); rounds go on while one matches something. With
// distinct ranks that is greedy's matching (the best pair left is mutual in every round). Then
// each pair's first token finds its place among the pairs by rank and writes the pair there if
// it is among the r best (emit): the pairs greedy takes first, in its order.
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace htm::greedy {

/// The most tokens a sample may have for the kernel (its per-token state in shared memory).
constexpr int64_t kMaxTokens = 1024;

/// Ordered pair (i, j)'s rank as match_pairs makes it, larger = taken first: a finite key beats
/// any −∞ one (those go by noise alone), then the key's value (its float bits made
/// order-preserving, −0 as +0), then the lower flat index i·T + j; a pair of one token ranks
/// below all. In int64: finite·2⁶² + bits·2³⁰ + 2⁶¹ + T²−1−flat (the diagonal: −2⁶³ + 2⁶¹ +
/// bits·2³⁰, finite·2⁶² added too), never overflowing.
HTM_HD inline int64_t pair_rank(float logit, float noise, int64_t i, int64_t j, int64_t T) {
  const float key = logit + noise;
  const bool finite = key >= -FLT_MAX;  // neither −∞ nor NaN: key > −∞
  float value = finite ? key : noise;
  if (value == 0.0f) value = 0.0f;  // −0 → +0: equal floats, equal bits
#if defined(__CUDA_ARCH__)
  const int32_t bits = __float_as_int(value);
#else
  int32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
#endif
  const int64_t ordered = bits < 0 ? (bits ^ 0x7fffffff) : bits;
  constexpr int64_t k61 = int64_t{1} << 61;
  const int64_t base = i == j ? INT64_MIN + k61 : k61 + T * T - 1 - (i * T + j);
  return base + ordered * (int64_t{1} << 30) + (finite ? (int64_t{1} << 62) : 0);
}

/// The unordered pair {i, j}'s rank: its better orientation's.
HTM_HD inline int64_t both_rank(const float* logits, const float* noise, int64_t i, int64_t j, int64_t T) {
  const int64_t a = pair_rank(logits[i * T + j], noise[i * T + j], i, j, T);
  const int64_t b = pair_rank(logits[j * T + i], noise[j * T + i], j, i, T);
  return a > b ? a : b;
}

/// One sample's state, a slot per token (in a block's shared memory on the device).
struct Rows {
  int64_t* best;     ///< this round's best rank among unmatched partners (−1: none)
  int64_t* matched;  ///< the rank of its pair once matched (−1: not yet)
  int32_t* choice;   ///< this round's best partner (−1: none)
  int32_t* partner;  ///< its pair's other token once matched (−1: not yet)
  uint8_t* alive;    ///< 1 while unmatched
};

/// The bytes Rows takes for T tokens.
HTM_HD inline int64_t rows_bytes(int64_t T) { return T * (8 + 8 + 4 + 4 + 1); }

/// Rows laid out in `memory` (rows_bytes(T) bytes, 8-byte aligned): the wide slots first.
HTM_HD inline Rows carve(void* memory, int64_t T) {
  auto* bytes = static_cast<uint8_t*>(memory);
  Rows rows;
  rows.best = reinterpret_cast<int64_t*>(bytes);
  rows.matched = rows.best + T;
  rows.choice = reinterpret_cast<int32_t*>(rows.matched + T);
  rows.partner = rows.choice + T;
  rows.alive = reinterpret_cast<uint8_t*>(rows.partner + T);
  return rows;
}

HTM_HD inline void start(const Rows& rows, int64_t i) {
  rows.alive[i] = 1;
  rows.matched[i] = -1;
  rows.partner[i] = -1;
  rows.best[i] = -1;
  rows.choice[i] = -1;
}

/// Every unordered pair's rank once, before the rounds: ranks[i·T + j] = both_rank(i, j), so a
/// round reads one int64 a candidate, a row's in a row (on the device: coalesced, a warp a row).
HTM_HD inline void fill_rank(const float* logits, const float* noise, int64_t T, int64_t flat, int64_t* ranks) {
  ranks[flat] = both_rank(logits, noise, flat / T, flat % T, T);
}

/// A best partner so far: the rank and the token (−1, −1: none).
struct Best {
  int64_t rank = -1;
  int32_t at = -1;
};

/// The better of two: the higher rank; two alike (only "none" can be, ranks being distinct) the
/// lower token.
HTM_HD inline Best better(Best a, Best b) {
  if (b.rank > a.rank || (b.rank == a.rank && b.at >= 0 && (a.at < 0 || b.at < a.at))) return b;
  return a;
}

/// Token i's best unmatched partner among j = lane, lane + lanes, ... (a lane's share of the
/// row; the lanes' shares combined with `better` give the row's). Every pair of two unmatched
/// tokens ranks ≥ 0.
HTM_HD inline Best partial_best(const int64_t* row, int64_t T, int64_t i, int64_t lane, int64_t lanes,
                                const Rows& rows) {
  Best top;
  for (int64_t j = lane; j < T; j += lanes) {
    if (j == i || !rows.alive[j]) continue;
    top = better(top, Best{row[j], static_cast<int32_t>(j)});
  }
  return top;
}

/// Token i matched if its choice chose it back (after every row's best of the round); true if so.
HTM_HD inline bool take_mutual(int64_t i, const Rows& rows) {
  const int32_t c = rows.choice[i];
  if (c < 0 || rows.choice[c] != i) return false;
  rows.matched[i] = rows.best[i];
  rows.partner[i] = c;
  rows.alive[i] = 0;
  return true;
}

/// Where token i's pair goes among the r best (once the matching is done): written by the pair's
/// lower token at the count of pairs ranked above it, if under r. src and dst: the sample's r.
HTM_HD inline void emit(int64_t T, int64_t r, int64_t i, const Rows& rows, int64_t* src, int64_t* dst) {
  const int32_t p = rows.partner[i];
  if (p < 0 || p < i) return;
  const int64_t rank = rows.matched[i];
  int64_t above = 0;
  for (int64_t k = 0; k < T; ++k)
    if (rows.partner[k] > k && rows.matched[k] > rank) ++above;
  if (above >= r) return;
  // The low 30 bits name the pair's taken orientation: flat = T²−1−(rank's low bits).
  const int64_t flat = T * T - 1 - (rank & ((int64_t{1} << 30) - 1));
  src[above] = flat / T;
  dst[above] = flat % T;
}

/// The whole matching of B samples on the host, the phases run a row at a time: what the kernel
/// computes (greedy_matching.cu), for the tests, with `lanes` lanes a row as a warp's. logits,
/// noise: B×T×T; src, dst: B×r; scratch: rows_bytes(T) bytes; ranks: T×T. Returns the most
/// rounds a sample took.
inline int64_t match_on_host(const float* logits, const float* noise, int64_t B, int64_t T, int64_t r, int64_t* src,
                             int64_t* dst, void* scratch, int64_t* ranks, int64_t lanes = 32) {
  const Rows rows = carve(scratch, T);
  int64_t most = 0;
  for (int64_t b = 0; b < B; ++b) {
    const float* L = logits + b * T * T;
    const float* N = noise + b * T * T;
    for (int64_t i = 0; i < T; ++i) start(rows, i);
    for (int64_t flat = 0; flat < T * T; ++flat) fill_rank(L, N, T, flat, ranks);
    int64_t rounds = 0;
    for (bool found = true; found;) {
      for (int64_t i = 0; i < T; ++i) {
        Best top;
        if (rows.alive[i])
          for (int64_t lane = 0; lane < lanes; ++lane)
            top = better(top, partial_best(ranks + i * T, T, i, lane, lanes, rows));
        rows.best[i] = top.rank;
        rows.choice[i] = top.at;
      }
      found = false;
      for (int64_t i = 0; i < T; ++i) found = take_mutual(i, rows) || found;
      ++rounds;
    }
    most = rounds > most ? rounds : most;
    for (int64_t i = 0; i < T; ++i) emit(T, r, i, rows, src + b * r, dst + b * r);
  }
  return most;
}

}  // namespace htm::greedy
