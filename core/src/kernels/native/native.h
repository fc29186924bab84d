// The native CPU kernels behind the backend seam (kernels/kernels.h), compiled when the build has
// HTM_NATIVE_KERNELS: oneDNN GEMMs in fp32 or bf16 (gemm.cpp), AVX-512 softmax rows and masks
// (softmax_rows.cpp), the linear layers and fused MLP ends as autograd nodes (linear.cpp), the
// fused attention (attention.cpp), counter-based dropout masks (dropout.cpp), the race pair
// sampler (sampler.cpp) and AdamW's update loop (adamw.cpp). CPU tensors only: the dispatchers
// in kernels/kernels.cpp send anything else to kernels/portable.h, which has the same signatures.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "kernels/kernels.h"

namespace htm::native {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                       const at::Tensor& weight, const at::Tensor& bias);
/// linear(layer_norm(x), w1, b1) and linear(layer_norm(x), w2, b2), keeping x alone for backward.
std::pair<at::Tensor, at::Tensor> norm_linear2(const at::Tensor& x, const at::Tensor& norm_weight,
                                               const at::Tensor& norm_bias, double eps, const at::Tensor& w1,
                                               const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2);
/// linear(gelu(linear(layer_norm(x), w1, b1)), w2, b2), keeping x alone for backward.
at::Tensor norm_mlp(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                    const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2);

/// softmax(QKᵀ/√d)V with dropout p on the weights (p = 0: none); row n of the whole batch's
/// B×h×Tq weights is masked by draw stream counter_bits(seed, first + n) (softmax_rows.h).
at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads, double p,
                           uint64_t seed, int64_t first);

/// x ∘ M, M = 0 or 1/(1−p) per entry: entry e is kept iff the 16-bit lane (first+e) mod 4 of
/// counter_bits(seed, (first+e)/4) is ≥ p·2¹⁶.
at::Tensor dropout(const at::Tensor& x, double p, uint64_t seed, int64_t first);

/// r disjoint pairs per sample from B×T×T float logits (already bounded), sample b's draws from
/// stream seeds[b]: {src, dst}, each B×r int64.
std::pair<at::Tensor, at::Tensor> sample_disjoint_pairs(const at::Tensor& logits, int64_t r,
                                                        const std::vector<uint64_t>& seeds);

/// One AdamW update of a contiguous float parameter in place (kernels/kernels.h: AdamWStep).
void adamw_update(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                  const AdamWStep& step);

}  // namespace htm::native
