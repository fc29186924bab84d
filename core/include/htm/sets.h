// Comparing sets of tokens whose order means nothing: the decoder of a point set (HTM Crosses
// and Trees data) returns its points in no fixed order, so reconstruction is scored after
// matching. Shapes: B batch, N elements per set, F features per element.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "htm/error.h"

namespace htm {

/// Thrown where a computation meets NaN or infinity it cannot go on with (a diverged model's
/// outputs); the trainer reports it as "training diverged at step N".
class NonFinite : public Error {
 public:
  using Error::Error;
};

/// The minimum-cost assignment of an n×n cost matrix (row-major), by the Hungarian method
/// (Kuhn-Munkres with potentials, O(n³)): column assigned to each row. Throws NonFinite when a
/// cost is NaN or infinite (the method would never end).
std::vector<int64_t> hungarian(const std::vector<double>& cost, int64_t n);

/// The scratch hungarian_into() reuses from one matrix to the next (no allocation per matrix).
struct HungarianWork {
  std::vector<double> u, v, minv;
  std::vector<int64_t> p, way;
  std::vector<char> used;
};

/// hungarian() on `n`×`n` costs at `cost` (row-major), the column of each row written to
/// `assignment` (n entries): the same arithmetic in the same order, so the same assignment.
void hungarian_into(const double* cost, int64_t n, HungarianWork& work, int64_t* assignment);

/// For each sample, the target element matched to each predicted one so that the summed squared
/// distance is least: B×N int64. prediction and target: B×N×F. No gradient. Where the gpu kernels
/// are in force for `prediction` (a GPU's tensor) and N ≤ 16, found on its device with no read-back
/// (a CUDA graph can hold it); otherwise by hungarian() on the host. Where several assignments
/// cost the least, the two may take different ones.
at::Tensor match_sets(const at::Tensor& prediction, const at::Tensor& target);

/// Per-sample mean squared error after the exact matching (B values, averaged over N·F like
/// MSE), in the graph through `prediction`.
at::Tensor matched_mse(const at::Tensor& prediction, const at::Tensor& target);

/// Per-sample Chamfer error: the mean squared distance from each element to the nearest element
/// of the other set, both ways, averaged, and divided by F to be on MSE's scale. B values, in
/// the graph. O(N²) per sample and no assignment: the cheaper, looser option.
at::Tensor chamfer(const at::Tensor& prediction, const at::Tensor& target);

}  // namespace htm
