// The portable backend's pieces (kernels/backend.h: htm::Backend's own definitions, the
// reference): plain torch ops, on whatever device the tensors live. In bf16 the operands of every
// matrix product are rounded to bfloat16 and multiplied in fp32 (what the native GEMMs do), and
// the dropout masks are the native ones, bit for bit, computed as int64 tensor ops. Kept plain on
// purpose: it is the reference the native and gpu backends are tested against.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "kernels/kernels.h"

namespace htm::portable {

/// The dropout mask alone (0 or 1/(1−p)): entry e as every backend's dropout keeps it.
at::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t seed, int64_t first, const at::Device& device);

/// The attention's mask over rows×cols weights: row n from stream counter_bits(seed, first + n).
at::Tensor attention_mask(int64_t rows, int64_t cols, double p, uint64_t seed, int64_t first, const at::Device& device);

/// x rounded to bfloat16 (nearest even) and back to float.
at::Tensor round_bf16(const at::Tensor& x);

/// The first r pairs of the greedy rule on keys logit + noise: r rounds of the best key among
/// pairs of unused tokens (where every such key is −∞, the best noise).
std::pair<at::Tensor, at::Tensor> greedy_pairs(const at::Tensor& logits, const at::Tensor& noise, int64_t r);

/// Draw k of every sample, flat indices i·T + j (B): pair (i, j) into column k of src and dst
/// (B×r), and tokens i and j marked in `used` (B×T bool).
void take_pairs(const at::Tensor& flat, int64_t k, at::Tensor& src, at::Tensor& dst, at::Tensor& used);

/// B×r×T: whether token t is still free at draw k (not taken by any of `drawn`, each B×r, before
/// it), or with `taken` the opposite, as `dtype` (1 or 0): a fill, a scatter each and a
/// comparison, with no read back.
at::Tensor free_at_draw(std::initializer_list<at::Tensor> drawn, int64_t T, bool taken = false,
                        at::ScalarType dtype = at::kBool);

/// Counts a product of m×k by k×n for gemm_flops(): 2mnk forward, and in training the two
/// products of its backward.
void count_product(int64_t m, int64_t n, int64_t k, bool backward);

/// Whether autograd will run backward through an op on these inputs.
bool in_training(std::initializer_list<const at::Tensor*> inputs);

}  // namespace htm::portable
