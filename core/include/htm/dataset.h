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

}  // namespace htm
