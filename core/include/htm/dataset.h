// Dataset plugins: samples as tensors, read or generated on construction.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "htm/plugin.h"

namespace htm {

enum class Split { train, test };

struct Batch {
  at::Tensor input;   ///< B×sample_shape float, images in [-1, 1]
  at::Tensor labels;  ///< B int64 (class ids), undefined when the data has none
  /// B×(N−1)×2 int64 when the data has a known hierarchy over its N tokens (sample_shape
  /// {N, F}): row k holds the two children of node N+k. Leaves are nodes 0..N−1 in the sample's
  /// token order; children come before their parents, so the last row is the root. Undefined
  /// when the hierarchy is unknown.
  at::Tensor tree;
};

class Dataset : public Plugin {
 public:
  ~Dataset() override;
  /// One sample's shape, e.g. {1, 28, 28}.
  virtual std::vector<int64_t> sample_shape() const = 0;
  /// Number of classes, 0 when unlabelled.
  virtual int64_t num_classes() const = 0;
  virtual int64_t size(Split split) const = 0;
  /// The samples at `indices` (int64, any order, repeats allowed).
  virtual Batch get(Split split, const at::Tensor& indices) const = 0;
};

/// Whether a dataset built with `params` draws data of its own for every run seed: it declares
/// kRunSeedParam and, where it also declares kPerRunParam, that is true (htm/manifest.h). The
/// datasets and the seed ledger (htm run --confirm) read the same rule here.
inline bool data_follow_run_seed(const Params& params) {
  return params.has(kRunSeedParam) && (!params.has(kPerRunParam) || params.flag(kPerRunParam));
}

}  // namespace htm
