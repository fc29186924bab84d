// The fused attention's small heads (d ≤ 16 channels, at most 16 keys: Trees, Crosses and the
// policy studies at width 16) in AVX-512 registers, one head at a time: a head's keys and values
// are a few registers, every query row is d + Tk fused multiply-adds and a softmax row. Through
// the blocked GEMM path each head cost five oneDNN calls in backward (two in forward) of a few
// hundred flops each, ~40 % of a Trees step; here the same head takes a fraction of one call.
#pragma once

#include <cstdint>

namespace htm {

/// Whether a head of d channels against tk keys takes these kernels (AVX-512 rows, fp32).
bool small_heads_fit(int64_t d, int64_t tk);

/// One head's rows: row r of Q, K, V, dO at q + r·ld_q (and so on), d channels each.
struct SmallHead {
  const float *q, *k, *v;
  int64_t ld_q, ld_k, ld_v;
  int64_t tq, tk, d;
};

/// The head's dropout: row r of its weights masked by mask_row(…, first + r, …) when on.
struct SmallDropout {
  bool on;
  uint64_t seed;
  int64_t first;
  uint32_t threshold;
  float scale;
};

/// out[r] = softmax(q_r Kᵀ/√d)·V (dropout on the weights), out's rows ld_out apart; lse[r] the
/// row's log-sum-exp of the scaled scores.
void small_head_forward(const SmallHead& h, const SmallDropout& drop, float* out, int64_t ld_out, float* lse);

/// Adds the head's gradients for dO (rows ld_g apart) to dq, dk, dv (rows ld_dq, ld_dkv apart),
/// recomputing its weights from lse.
void small_head_backward(const SmallHead& h, const SmallDropout& drop, const float* g, int64_t ld_g, const float* lse,
                         float* dq, int64_t ld_dq, float* dk, float* dv, int64_t ld_dkv);

}  // namespace htm
