// Row-major single-precision GEMM through oneDNN (libdnnl, which libtorch itself loads). On
// this project's AVX-512 machines it runs 1.5-2.8x faster than the OpenBLAS libtorch calls.
#pragma once

#include <cstdint>

namespace htm {

/// C[m×n] = alpha · op(A) · op(B) + beta · C, all row-major with leading dimensions lda, ldb, ldc.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// Floating-point operations (2·m·n·k per call) gemm() has done in this process so far: what
/// `htm bench` divides by a step's time (the linear layers and attention, forward and backward).
int64_t gemm_flops();

}  // namespace htm
