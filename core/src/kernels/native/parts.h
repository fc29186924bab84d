// The pieces the native nodes are made of (linear.cpp, attention.cpp), for a node made of several
// of them (block.cpp): a node that calls these in the order the nodes one by one ran computes
// what they computed, bit for bit. Contiguous 2-D operands are rows × channels.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>

#include "kernels/precision.h"

namespace htm::native {

/// y = x Wᵀ + b over the contiguous rows of x2 (the bias rows written first, the GEMM adding onto
/// them). In bf16 x2 is rounded once and that copy is what backward keeps. {y, x kept, W kept}.
std::array<at::Tensor, 3> linear_product(const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& bias,
                                         bool bf16 = matmul_precision() == Precision::bf16);

/// Backward's GEMMs for gradient g (rows × out) given what linear_product kept: {dx, dW, db}, each
/// undefined where `needed` says no (db is g.sum(0)).
std::array<at::Tensor, 3> linear_grads(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,
                                       std::array<bool, 3> needed);

/// linear_grads' dx alone, g rounded first where the product ran in bf16.
at::Tensor linear_input_grad(const at::Tensor& g, const at::Tensor& w, bool bf16);

/// layer_norm over contiguous rows × C: {normalised, mean, rstd} (layer_norm.h's kernels for
/// narrow rows, torch's otherwise).
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_forward(const at::Tensor& x2, const at::Tensor& nw,
                                                            const at::Tensor& nb, double eps);

/// The norm's backward from dn for what `asked` wants of {x, weight, bias}: {dx shaped like `like`
/// with C last, dweight, dbias}.
std::tuple<at::Tensor, at::Tensor, at::Tensor> norm_grads(std::array<bool, 3> asked, const at::Tensor& dn,
                                                          const at::Tensor& x, const at::Tensor& mean,
                                                          const at::Tensor& rstd, const at::Tensor& nw,
                                                          const at::Tensor& nb, const at::Tensor& like);

/// `t`'s sizes with the last one `last`.
std::vector<int64_t> with_last(const at::Tensor& t, int64_t last);

/// What the fused attention's forward made: the output and log-sum-exp, and q, k, v as backward
/// takes them (in bf16 their rounded copies).
struct AttentionForward {
  at::Tensor out, lse, q, k, v;
};

/// softmax(QKᵀ/√d)V over `heads` heads (q Bq×Tq×C, k and v B×Tk×C, last dimension contiguous),
/// dropout p on the weights from stream (seed, first): the fused attention's forward.
AttentionForward attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                                   double dropout, uint64_t seed, int64_t first);

/// Its gradients {dq, dk, dv} for dO = g, from what attention_forward made.
std::array<at::Tensor, 3> attention_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& lse, const at::Tensor& g, int64_t heads, double dropout,
                                             uint64_t seed, int64_t first);

}  // namespace htm::native
