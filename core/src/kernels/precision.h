// The precision the SDK's matrix products run in (runtime.precision). In bf16, htm::linear and
// htm::fused_attention round their GEMM operands to bfloat16 and accumulate in fp32 (oneDNN's
// bf16 GEMM: AVX512-BF16 dot products, AMX tiles where the CPU exposes them); everything else
// stays fp32: weights, optimiser state, norms, softmax, reductions, the outputs of every op.
#pragma once

#include <string>

#include "kernels/setting_scope.h"

namespace htm {

enum class Precision { fp32, bf16 };

/// The precision new matrix products start in. A product's backward runs in the precision its
/// forward ran in, whatever is in force when backward runs.
Precision matmul_precision();

/// Sets it for the whole process (the host does, from runtime.precision, before a run).
void set_matmul_precision(Precision precision);

/// Holds a precision for a scope and restores the previous one: the host computes merge
/// policies' scores in fp32 this way, whatever the run's precision.
using PrecisionScope = SettingScope<Precision, matmul_precision, set_matmul_precision>;

/// Whether oneDNN multiplies bf16 natively here (AVX512-BF16 or AMX-BF16, as the CPU has and
/// ONEDNN_MAX_CPU_ISA allows). Without it, bf16 would be emulated more slowly than fp32, so the
/// host falls back to fp32 and says so.
bool cpu_has_bf16();

/// The bf16 hardware found, in words: "AMX-BF16", "AVX512-BF16" or "none".
std::string bf16_hardware();

}  // namespace htm
