// GEMMs through oneDNN in fp32 or bf16, the bf16 rounding, and the bf16 hardware oneDNN finds.
#include "kernels/native/gemm.h"

#include <immintrin.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "htm/error.h"
#include "kernels/kernels.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Exported by libdnnl 2.x beside dnnl_sgemm (declared in dnnl.h from 3.0 on): bf16 operands
// (raw bits), fp32 accumulation and C, row-major.
extern "C" int dnnl_gemm_bf16bf16f32(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                                     const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                                     float* c, int64_t ldc);
// The instruction set oneDNN dispatches to: the CPU's, capped by ONEDNN_MAX_CPU_ISA if set.
extern "C" int dnnl_get_effective_cpu_isa();

namespace htm {

namespace {

void check(int status, const char* what) {
  if (status != 0) throw Error(std::string("oneDNN ") + what + " failed with status " + std::to_string(status));
}

// Round to nearest even; a NaN stays a NaN (a payload in the low bits alone would round to Inf).
uint16_t round_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

void to_bf16_scalar(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = round_bf16(src[i]);
}

__attribute__((target("avx512f,avx512bf16"))) void to_bf16_avx512(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh packed = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), reinterpret_cast<const __m256i&>(packed));
  }
  to_bf16_scalar(src + i, n - i, dst + i);
}

bool has_avx512_bf16() {
  static const bool has = [] {
    __builtin_cpu_init();
    return avx512_allowed() && __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return has;
}

// Per-thread room for an fp32 operand's bf16 copy (one for A, one for B): grown, never shrunk.
uint16_t* scratch(int which, int64_t elements) {
  thread_local std::vector<uint16_t> buffers[2];
  auto& buffer = buffers[which];
  if (static_cast<int64_t>(buffer.size()) < elements) buffer.resize(elements);
  return buffer.data();
}

// The operand as bf16: as it is, or rounded into scratch `which` (then packed, ld = its columns).
const uint16_t* as_bf16(Operand x, int64_t rows, int64_t cols, int which, int64_t* ld) {
  if (x.bf16) {
    *ld = x.ld;
    return static_cast<const uint16_t*>(x.data);
  }
  uint16_t* out = scratch(which, rows * cols);
  to_bf16(static_cast<const float*>(x.data), rows, cols, x.ld, out);
  *ld = cols;
  return out;
}

}  // namespace

bool avx512_allowed() {
  static const bool allowed = [] {
    const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
    return cap == nullptr || *cap == '\0' || std::strcmp(cap, "avx512") == 0;
  }();
  return allowed;
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  count_gemm_flops(2 * m * n * k);
  check(dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), "sgemm");
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Operand a, Operand b, float beta,
          float* c, int64_t ldc) {
  if (!a.bf16 && !b.bf16) {
    gemm(trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(a.data), a.ld, static_cast<const float*>(b.data),
         b.ld, beta, c, ldc);
    return;
  }
  if (m == 0 || n == 0) return;
  count_gemm_flops(2 * m * n * k);
  int64_t lda = 0, ldb = 0;
  const uint16_t* ab = as_bf16(a, trans_a ? k : m, trans_a ? m : k, 0, &lda);
  const uint16_t* bb = as_bf16(b, trans_b ? n : k, trans_b ? k : n, 1, &ldb);
  check(dnnl_gemm_bf16bf16f32(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, ab, lda, bb, ldb, beta, c, ldc),
        "bf16 gemm");
}

void to_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst) {
  if (ld == cols) {  // one run
    cols *= rows;
    rows = 1;
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (has_avx512_bf16())
      to_bf16_avx512(src + r * ld, cols, dst + r * cols);
    else
      to_bf16_scalar(src + r * ld, cols, dst + r * cols);
  }
}

std::string native_bf16_hardware() {
  // dnnl_cpu_isa_t masks (oneDNN 2.x): avx512_core_bf16 = 0xe7, avx512_core_amx = 0x3e7; 3.x's
  // ISAs above them hold their bits (avx10_1_512 = 0x1ef, avx10_1_512_amx = 0xfef).
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  if ((isa & 0x3e7u) == 0x3e7u) return "AMX-BF16";
  if ((isa & 0xe7u) == 0xe7u) return "AVX512-BF16";
  return "none";
}

}  // namespace htm
