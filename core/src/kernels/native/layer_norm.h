// A layer norm over narrow rows (at most 64 channels) in AVX-512 registers, forward and backward.
// torch's own (native_layer_norm) costs ~11 µs for 256 rows of 16 and ~39 µs for 1024, however
// little there is to do, and a small model runs it about a hundred times a step (forward, again
// in backward, and its backward): ~12 % of a Trees step. Wider rows keep torch's kernel.
#pragma once

#include <cstdint>

namespace htm {

/// Whether rows of C channels take these kernels (C ≤ 64 and AVX-512 rows: softmax_rows.h).
bool narrow_norm(int64_t C);

/// out = (x − mean)·rstd·w + b per row (w, b may be null: 1 and 0), rows C apart, with each row's
/// mean and rstd = 1/√(var + eps) (the biased variance) written to mean[r] and rstd[r].
void layer_norm_rows(const float* x, int64_t rows, int64_t C, const float* w, const float* b, float eps, float* out,
                     float* mean, float* rstd);

/// The gradients from dn given x, the rows' mean and rstd, and w (may be null): dx (rows × C),
/// dw and db (C each, overwritten); any of the three may be null (not wanted).
void layer_norm_backward_rows(const float* dn, const float* x, const float* mean, const float* rstd, const float* w,
                              int64_t rows, int64_t C, float* dx, float* dw, float* db);

}  // namespace htm
