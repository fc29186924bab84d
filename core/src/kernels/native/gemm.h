// Row-major GEMMs through oneDNN (libdnnl, which libtorch itself loads): single precision, and
// bf16 operands with fp32 accumulation and output. On this project's AVX-512 machines sgemm runs
// 1.5-2.8x faster than the OpenBLAS libtorch calls, and the bf16 GEMM about 2x sgemm.
#pragma once

#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

namespace htm {

/// C[m×n] = alpha · op(A) · op(B) + beta · C, all row-major with leading dimensions lda, ldb, ldc.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// One GEMM operand as stored: fp32, or bf16 bits (what to_bf16 writes), with its leading dimension.
struct Operand {
  const void* data;
  int64_t ld;
  bool bf16;
};

/// The same product with each operand fp32 or bf16. Both fp32: gemm() above. Otherwise the fp32
/// one (if any) is rounded to bf16 in a per-thread buffer and oneDNN's bf16 GEMM runs, fp32 C.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Operand a, Operand b, float beta,
          float* c, int64_t ldc);

/// Rounds rows×cols floats (row stride ld) to bf16 bits, round-to-nearest-even, packed into dst
/// (row stride cols). Vectorised with the CPU's own conversion instruction where it has one.
void to_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst);

/// A float tensor's bf16 copy, contiguous (linear.cpp). A 3-D one whose last dimension is
/// contiguous (keys and values: strided halves of one projection) is read in place.
at::Tensor bf16_copy(const at::Tensor& x);

/// Whether htm's own AVX-512 code may run: unless torch's ATEN_CPU_CAPABILITY caps the CPU below
/// it ("avx2", "default"), as torch's kernels are then. With ONEDNN_MAX_CPU_ISA=AVX2 and
/// OPENBLAS_CORETYPE=Haswell beside it, a CPU with AVX-512 computes what an AVX2 one does, bit
/// for bit (tests/golden_test.cpp pins both from one machine).
bool avx512_allowed();

/// The bf16 hardware oneDNN multiplies on here: "AMX-BF16", "AVX512-BF16" or "none".
std::string native_bf16_hardware();

}  // namespace htm
