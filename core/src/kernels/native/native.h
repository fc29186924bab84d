// The native backend (kernels/backend.h), compiled when the build has HTM_NATIVE_KERNELS: oneDNN
// GEMMs in fp32 or bf16 (gemm.cpp), AVX-512 softmax rows, norms and small heads (softmax_rows.cpp,
// layer_norm.cpp, attention_small.cpp), the linear layers and fused MLP ends as autograd nodes
// (linear.cpp), the fused attention (attention.cpp), counter-based dropout masks (dropout.cpp), the
// race pair sampler (sampler.cpp), bmm's products (batched_product.cpp), the set assignment
// (assignment.cpp) and AdamW's update loop (adamw.cpp). CPU tensors only:
// backend_for sends anything else to the gpu or portable backend. What it does not override
// (the sampler's entropy, the kept tokens, clipping) is the reference.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "kernels/backend.h"

namespace htm::native {

class NativeBackend final : public Backend {
 public:
  const char* name() const override { return "native"; }
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const override;
  /// One autograd node keeping h alone (gelu(h) recomputed in backward).
  at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias) const override;
  /// One node keeping x alone (the normalised rows recomputed in backward).
  at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                         const at::Tensor& weight, const at::Tensor& bias) const override;
  std::pair<at::Tensor, at::Tensor> norm_linear2(const at::Tensor& x, const at::Tensor& norm_weight,
                                                 const at::Tensor& norm_bias, double eps, const at::Tensor& w1,
                                                 const at::Tensor& b1, const at::Tensor& w2,
                                                 const at::Tensor& b2) const override;
  at::Tensor norm_mlp(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                      const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                      const at::Tensor& b2) const override;
  /// oneDNN's GEMM (fp32, or bf16 operands where given; an Error where the CPU has no bf16 GEMM).
  void product_into(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) const override;
  bool own_products() const override { return true; }
  /// torch::bmm's BLAS calls (or small loop) per item on pointers, as one node: the same bits
  /// (batched_product.cpp); torch::bmm itself for other types and devices.
  at::Tensor batched_product(const at::Tensor& a, const at::Tensor& b) const override;
  at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads, double p,
                             uint64_t seed, int64_t first) const override;
  /// Entry e kept iff the 16-bit lane (first+e) mod 4 of counter_bits(seed, (first+e)/4) is ≥ p·2¹⁶.
  at::Tensor dropout(const at::Tensor& x, double p, uint64_t seed, int64_t first) const override;
  /// One stream per sample, seeded from `generator` in order (for the whole batch when
  /// data-parallel): the same draws for any thread count; an exponential race per sample.
  std::pair<at::Tensor, at::Tensor> sample_disjoint_pairs(const at::Tensor& logits, int64_t r,
                                                          at::Generator generator) const override;
  /// One autograd node over kernels/pair_log_prob.h's host parts (log_prob.cpp); the reference
  /// where the shape or type is not the node's.
  at::Tensor pair_log_prob(const at::Tensor& masked, const at::Tensor& src, const at::Tensor& dst) const override;
  /// The Hungarian method in AVX-512 registers for sets of at most 16 (assignment.cpp): the
  /// reference's assignment, ties included; the reference for larger sets.
  at::Tensor min_cost_assignment(const at::Tensor& cost) const override;
  /// One pass over each contiguous float parameter in place.
  void adamw_update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& exp_avg,
                    std::vector<at::Tensor>& exp_avg_sq, const std::vector<at::Tensor>& grads,
                    const AdamWStep& step) const override;
};

/// The race sampler with each sample's stream seed given (B seeds): what sample_disjoint_pairs
/// runs once it has drawn them.
std::pair<at::Tensor, at::Tensor> race_disjoint_pairs(const at::Tensor& logits, int64_t r,
                                                      const std::vector<uint64_t>& seeds);

}  // namespace htm::native
