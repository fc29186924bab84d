// The fused attention's per-row work on a block of scores: softmax, its recomputation and
// gradient, and the dropout mask. AVX-512 kernels where the CPU has AVX-512 (F, BW, DQ), plain
// loops elsewhere; both give the same masks bit for bit, and the same values to rounding.
#pragma once

#include <cstdint>

namespace htm {

/// Whether these rows run their AVX-512 kernels here (the CPU has AVX-512 F, BW and DQ, and
/// ATEN_CPU_CAPABILITY does not cap it: gemm.h avx512_allowed).
bool rows_avx512();

/// x ← softmax(x) over n entries; returns the log-sum-exp (max + log Σ exp(x − max)).
float softmax_row(float* x, int64_t n);

/// x ← exp(x − shift): the weights recomputed from a saved log-sum-exp.
void exp_row(float* x, int64_t n, float shift);

/// w ← w ∘ M for row `row` of the dropout mask of stream `seed`: M is 0 where the row's 16-bit
/// counter draw is below `threshold`, else `scale` (= 1/(1−p)).
void mask_row(float* w, int64_t n, uint64_t seed, uint64_t row, uint32_t threshold, float scale);

/// dp ← p ∘ (dp − Σ p∘dp): the gradient through a softmax row, given its output p.
void softmax_grad_row(const float* p, float* dp, int64_t n);

}  // namespace htm
