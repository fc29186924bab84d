// An MLP's two ends, and its whole body, through the kernels in force (kernels/kernels.h). The native ones are single
// autograd nodes: each keeps one activation for backward where the ops apart keep two, and
// recomputes the other there, with the same values and gradients as the ops apart, bit for bit
// in fp32. The portable ones are the ops apart.
#pragma once

#include <utility>

#include <ATen/core/Tensor.h>

#include "kernels/setting_scope.h"

namespace htm {

/// linear(gelu(h), weight, bias), keeping h alone (gelu(h) is recomputed in backward).
at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);

/// linear(layer_norm(x), weight, bias) over the last dimension, keeping x alone: the normalised
/// tokens (and the norm's statistics) are recomputed in backward.
at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                       const at::Tensor& weight, const at::Tensor& bias);

/// linear(layer_norm(x), w1, b1) and linear(layer_norm(x), w2, b2): two products of one norm (a
/// self-attention's queries, and its keys with values). The native and gpu kernels keep x alone
/// (the gpu ones where x is ≥ 1 MiB) and compute the normalised tokens again in backward, the same
/// values and gradients bit for bit; the portable ones are the ops apart.
std::pair<at::Tensor, at::Tensor> norm_linear2(const at::Tensor& x, const at::Tensor& norm_weight,
                                               const at::Tensor& norm_bias, double eps, const at::Tensor& w1,
                                               const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2);

/// linear(gelu(linear(layer_norm(x), w1, b1)), w2, b2): an MLP's whole body. norm_linear then
/// gelu_linear, except under runtime.recompute = "mlp" in training, where the native and gpu
/// kernels keep x alone and compute the rest again in backward (fc1's product twice; the same
/// values and gradients bit for bit; the gpu ones only where the hidden activation is ≥ 1 MiB).
at::Tensor norm_mlp(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                    const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2);

/// Whether norm_mlp keeps its input alone (runtime.recompute = "mlp"); off by default.
bool recompute_mlps();
void set_recompute_mlps(bool on);

/// Holds a choice for a scope and restores the previous one (tests compare the two).
using RecomputeMlpsScope = SettingScope<bool, recompute_mlps, set_recompute_mlps>;

}  // namespace htm
