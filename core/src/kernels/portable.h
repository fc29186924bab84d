// The portable kernels behind the backend seam (kernels/kernels.h): plain torch ops, on whatever
// device the tensors live. The same signatures and maths as kernels/native/native.h: in bf16 the
// operands of every matrix product are rounded to bfloat16 and multiplied in fp32 (what the
// native GEMMs do), and the dropout masks are the native ones, bit for bit, computed as int64
// tensor ops. Kept plain on purpose: it is the reference the native kernels are tested against.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "kernels/kernels.h"

namespace htm::portable {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                       const at::Tensor& weight, const at::Tensor& bias);
at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads, double p,
                           uint64_t seed, int64_t first);
at::Tensor dropout(const at::Tensor& x, double p, uint64_t seed, int64_t first);

/// The dropout mask alone (0 or 1/(1−p)): entry e as native::dropout keeps it.
at::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t seed, int64_t first, const at::Device& device);

/// The attention's mask over rows×cols weights: row n from stream counter_bits(seed, first + n).
at::Tensor attention_mask(int64_t rows, int64_t cols, double p, uint64_t seed, int64_t first, const at::Device& device);

/// x rounded to bfloat16 (nearest even) and back to float.
at::Tensor round_bf16(const at::Tensor& x);

/// Gumbel(0,1) noise shaped like `like`, as −log E with E ~ Exp(1) from `generator` on the
/// generator's device (for the whole batch when data-parallel: row_shard.h), on like's device.
at::Tensor gumbel_like(const at::Tensor& like, at::Generator generator);

/// r disjoint pairs per sample from B×T×T float logits (already bounded): Gumbel keys drawn from
/// `generator` (for the whole batch when data-parallel: row_shard.h), then r rounds of the best
/// key among pairs of unused tokens. The same distribution as the native race.
std::pair<at::Tensor, at::Tensor> sample_disjoint_pairs(const at::Tensor& logits, int64_t r, at::Generator generator);

/// The first r pairs of the greedy rule on keys logit + noise: r rounds of the best key among
/// pairs of unused tokens (where every such key is −∞, the best noise).
std::pair<at::Tensor, at::Tensor> greedy_pairs(const at::Tensor& logits, const at::Tensor& noise, int64_t r);

/// Draw k of every sample, flat indices i·T + j (B): pair (i, j) into column k of src and dst
/// (B×r), and tokens i and j marked in `used` (B×T bool).
void take_pairs(const at::Tensor& flat, int64_t k, at::Tensor& src, at::Tensor& dst, at::Tensor& used);

/// Counts a product of m×k by k×n for gemm_flops(): 2mnk forward, and in training the two
/// products of its backward.
void count_product(int64_t m, int64_t n, int64_t k, bool backward);

/// Whether autograd will run backward through an op on these inputs.
bool in_training(std::initializer_list<const at::Tensor*> inputs);

void adamw_update(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                  const AdamWStep& step);

}  // namespace htm::portable
