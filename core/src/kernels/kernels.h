// The kernels in force and the SDK's entry points beside htm/layers.h (AdamW's update, the FLOP
// count). Every custom kernel the SDK runs (the GEMMs of htm::linear and its fused MLP ends, bf16
// rounding, the fused attention with its softmax rows, the dropout masks, the pair sampler and
// its probabilities, the policies' random draws, the kept tokens, the set assignment, clipping
// and AdamW's update) is an operation of kernels/backend.h, which has three backends:
//   native    today's CPU kernels (kernels/native/: oneDNN GEMMs, AVX-512 rows, SplitMix masks),
//             compiled when the build has HTM_NATIVE_KERNELS, and used only on CPU tensors;
//   gpu       torch ops with few launches and random draws on the tensor's device, and htm's
//             CUDA kernels where nvcc built them (kernels/gpu.h): what a tensor on a GPU takes;
//   portable  the reference: the native maths in plain torch ops (kernels/portable.cpp), any device.
// runtime.kernels = "native" (the default) gives each tensor the first of native and gpu that
// fits its device, "portable" the reference everywhere. Native and portable draw the same
// dropout masks, bit for bit; all three pair samplers draw from the same distribution, and the
// gpu one takes the portable one's pairs given the same noise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/setting_scope.h"

namespace at {
class Tensor;
}

namespace htm {

/// native: the native kernels on CPU tensors (where built, else portable), the gpu ones on any
/// other device; portable: the reference everywhere; gpu: the gpu kernels on every device (the
/// CPU suite tests them this way).
enum class Kernels { native, portable, gpu };

/// The kernels in force (runtime.kernels; native by default where it is built).
Kernels kernels();
void set_kernels(Kernels kernels);

/// Whether this build has the native CPU kernels (CMake option HTM_NATIVE_KERNELS).
bool native_kernels_built();

/// "native", "portable" or "gpu".
std::string kernels_name(Kernels kernels);

/// Holds a choice for a scope and restores the previous one (tests compare the two).
using KernelsScope = SettingScope<Kernels, kernels, set_kernels>;

/// One AdamW update, in float as torch computes it: p ← p·decay; m ← β₁m + rest1·g;
/// v ← β₂v + rest2·g²; p ← p − step_size·m/(√v/root_bias2 + ε). (rest1 = 1 − β₁ and
/// rest2 = 1 − β₂ are given, worked out in double, so both kernels round them alike.)
struct AdamWStep {
  float decay, beta1, beta2, rest1, rest2, step_size, root_bias2, eps;
};

/// The update on one parameter, through the kernels in force.
void adamw_update(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                  const AdamWStep& step);

/// The same update on several parameters (one device): a few multi-tensor launches on the gpu
/// kernels, one parameter at a time on the others.
void adamw_update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& exp_avg,
                  std::vector<at::Tensor>& exp_avg_sq, const std::vector<at::Tensor>& grads, const AdamWStep& step);

/// Adds 2·m·n·k to the count gemm_flops() reports (the portable kernels count their products).
void count_gemm_flops(int64_t flops);

/// Floating-point operations of the matrix products the SDK's kernels ran in this process so
/// far: what `htm bench` divides by a step's time (the linear layers and attention, forward and
/// backward).
int64_t gemm_flops();

}  // namespace htm
