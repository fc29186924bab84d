// An MLP's two ends, through the kernels in force (kernels/kernels.h). The native ones are single
// autograd nodes: each keeps one activation for backward where the ops apart keep two, and
// recomputes the other there, with the same values and gradients as the ops apart, bit for bit
// in fp32. The portable ones are the ops apart.
#pragma once

#include <ATen/core/Tensor.h>

namespace htm {

/// linear(gelu(h), weight, bias), keeping h alone (gelu(h) is recomputed in backward).
at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);

/// linear(layer_norm(x), weight, bias) over the last dimension, keeping x alone: the normalised
/// tokens (and the norm's statistics) are recomputed in backward.
at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                       const at::Tensor& weight, const at::Tensor& bias);

}  // namespace htm
