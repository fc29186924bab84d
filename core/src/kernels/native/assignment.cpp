// The point-set matching's Hungarian method (htm::hungarian_into, sdk/sets.cpp) for sets of at
// most 16 elements with a row's columns in two AVX-512 registers of doubles: each step's reduced
// costs, its smallest unused column and the potentials' update as masked vector operations,
// where the reference loops over the columns twice with a branch on each. The same subtractions
// in the same order and the same first smallest column, so the same assignment, ties included
// (tests/assignment_test.cpp, NativeAssignment.*). An evaluation of Trees matches 6,144 sets
// twice; a training step 64.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/sets.h"
#include "kernels/native/gemm.h"
#include "kernels/native/native.h"
#include "kernels/native/row16.h"

namespace htm {
namespace {

constexpr int64_t kMaxElements = 16;

// One n×n cost (row-major doubles, n ≤ 16): the column of each row into `assignment`. Column j
// (1-based, as the reference's) is lane j-1: lanes 0-7 in the first register, 8-15 in the second.
HTM_AVX512 void hungarian16(const double* cost, int64_t n, int64_t* assignment) {
  const double inf = std::numeric_limits<double>::infinity();
  const __mmask16 columns = row16_lanes(n);
  double u[kMaxElements + 1] = {};   // row potentials, 1-based
  int64_t p[kMaxElements + 1] = {};  // p[j]: the row matched to column j (0: none); p[0] the row being placed
  __m512d v[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};  // column potentials
  alignas(64) double minv_of[kMaxElements];
  alignas(64) int32_t way_of[kMaxElements];
  for (int64_t i = 1; i <= n; ++i) {
    p[0] = i;
    int64_t j0 = 0;
    __m512d minv[2] = {_mm512_set1_pd(inf), _mm512_set1_pd(inf)};
    __m512i way = _mm512_setzero_si512();
    __mmask16 used = 0;  // columns 1..n (column 0, the row's own start, is always used)
    do {
      if (j0 != 0) used = static_cast<__mmask16>(used | (1u << (j0 - 1)));
      const int64_t i0 = p[j0];
      const __mmask16 free = static_cast<__mmask16>(columns & ~used);
      const double* row = cost + (i0 - 1) * n;
      const __m512d ui0 = _mm512_set1_pd(u[i0]);
      __mmask16 better = 0;
      for (int h = 0; h < 2; ++h) {
        const __mmask8 lanes = static_cast<__mmask8>(free >> (8 * h));
        if (lanes == 0) continue;
        const __m512d c = _mm512_maskz_loadu_pd(lanes, row + 8 * h);
        const __m512d cur = _mm512_sub_pd(_mm512_sub_pd(c, ui0), v[h]);  // (c − u[i0]) − v[j], as the reference
        const __mmask8 lt = _mm512_mask_cmp_pd_mask(lanes, cur, minv[h], _CMP_LT_OQ);
        minv[h] = _mm512_mask_mov_pd(minv[h], lt, cur);
        better = static_cast<__mmask16>(better | (static_cast<unsigned>(lt) << (8 * h)));
      }
      way = _mm512_mask_set1_epi32(way, better, static_cast<int32_t>(j0));
      // The first free column of least minv: the reference's strict '<' scan in column order.
      const double least = std::fmin(_mm512_mask_reduce_min_pd(static_cast<__mmask8>(free), minv[0]),
                                     _mm512_mask_reduce_min_pd(static_cast<__mmask8>(free >> 8), minv[1]));
      const __m512d at_least = _mm512_set1_pd(least);
      const unsigned equal =
          static_cast<unsigned>(_mm512_mask_cmp_pd_mask(static_cast<__mmask8>(free), minv[0], at_least, _CMP_EQ_OQ)) |
          (static_cast<unsigned>(
               _mm512_mask_cmp_pd_mask(static_cast<__mmask8>(free >> 8), minv[1], at_least, _CMP_EQ_OQ))
           << 8);
      const int64_t j1 = __builtin_ctz(equal) + 1;
      _mm512_store_pd(minv_of, minv[0]);
      _mm512_store_pd(minv_of + 8, minv[1]);
      const double delta = minv_of[j1 - 1];  // that column's own value (a zero's sign as the reference's)
      const __m512d d = _mm512_set1_pd(delta);
      u[p[0]] += delta;
      for (unsigned rest = used; rest != 0; rest &= rest - 1) u[p[__builtin_ctz(rest) + 1]] += delta;
      for (int h = 0; h < 2; ++h) {
        v[h] = _mm512_mask_sub_pd(v[h], static_cast<__mmask8>(used >> (8 * h)), v[h], d);
        minv[h] = _mm512_mask_sub_pd(minv[h], static_cast<__mmask8>(free >> (8 * h)), minv[h], d);
      }
      j0 = j1;
    } while (p[j0] != 0);
    _mm512_store_si512(way_of, way);
    do {  // augment along the alternating path
      const int64_t j1 = way_of[j0 - 1];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  for (int64_t k = 0; k < n; ++k) assignment[k] = -1;
  for (int64_t j = 1; j <= n; ++j)
    if (p[j] > 0) assignment[p[j] - 1] = j - 1;
}

bool avx512_hungarian() {
  static const bool ok = avx512_allowed() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return ok;
}

}  // namespace

torch::Tensor native::NativeBackend::min_cost_assignment(const torch::Tensor& cost) const {
  const int64_t B = cost.size(0), N = cost.size(1);
  if (N < 1 || N > kMaxElements || !avx512_hungarian()) return Backend::min_cost_assignment(cost);
  const auto host = cost.to(torch::kDouble).contiguous();
  const double* c = host.data_ptr<double>();
  for (int64_t k = 0; k < B * N * N; ++k)
    if (!std::isfinite(c[k])) throw NonFinite("the matching costs hold NaN or infinity");
  auto index = torch::empty({B, N}, torch::kLong);
  int64_t* idx = index.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) hungarian16(c + b * N * N, N, idx + b * N);
  return index;
}

}  // namespace htm
