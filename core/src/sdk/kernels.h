// The backend seam. Every custom kernel the SDK runs (the GEMMs of htm::linear and its fused
// MLP ends, bf16 rounding, the fused attention with its softmax rows, the dropout masks, the
// pair sampler and AdamW's update) has two implementations:
//   native    today's CPU kernels (sdk/native/: oneDNN GEMMs, AVX-512 rows, SplitMix masks),
//             compiled when the build has HTM_NATIVE_KERNELS, and used only on CPU tensors;
//   portable  the same maths in plain torch ops (sdk/portable.cpp), on any device.
// runtime.kernels picks one for the process; a tensor on another device always takes the
// portable one. Both draw the same dropout masks, bit for bit; the pair samplers draw from the
// same distribution with different random streams.
#pragma once

#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

namespace htm {

enum class Kernels { native, portable };

/// The kernels in force (runtime.kernels; native by default where it is built).
Kernels kernels();
void set_kernels(Kernels kernels);

/// Whether this build has the native CPU kernels (CMake option HTM_NATIVE_KERNELS).
bool native_kernels_built();

/// Whether an op on `t` runs the native kernels: built, selected, and t on the CPU.
bool use_native(const at::Tensor& t);

/// "native" or "portable".
std::string kernels_name(Kernels kernels);

/// Holds a choice for a scope and restores the previous one (tests compare the two).
class KernelsScope {
 public:
  explicit KernelsScope(Kernels kernels);
  ~KernelsScope();
  KernelsScope(const KernelsScope&) = delete;
  KernelsScope& operator=(const KernelsScope&) = delete;

 private:
  Kernels previous_;
};

/// One AdamW update, in float as torch computes it: p ← p·decay; m ← β₁m + rest1·g;
/// v ← β₂v + rest2·g²; p ← p − step_size·m/(√v/root_bias2 + ε). (rest1 = 1 − β₁ and
/// rest2 = 1 − β₂ are given, worked out in double, so both kernels round them alike.)
struct AdamWStep {
  float decay, beta1, beta2, rest1, rest2, step_size, root_bias2, eps;
};

/// The update on one parameter, through the kernels in force.
void adamw_update(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                  const AdamWStep& step);

/// Adds 2·m·n·k to the count gemm_flops() reports (the portable kernels count their products).
void count_gemm_flops(int64_t flops);

/// Floating-point operations of the matrix products the SDK's kernels ran in this process so
/// far: what `htm bench` divides by a step's time (the linear layers and attention, forward and
/// backward).
int64_t gemm_flops();

}  // namespace htm
