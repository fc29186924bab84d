// A labelled image dataset held as bytes: the dataset plugins that read image files (cifar10,
// fashion_mnist) fill each split's N×C×H×W uint8 images and N labels once, and samples are
// served scaled to [-1, 1]. Header-only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "htm/dataset.h"

namespace htm {

class ByteImageDataset : public Dataset {
 public:
  /// One split's samples.
  struct Part {
    torch::Tensor images;  ///< N×C×H×W uint8
    torch::Tensor labels;  ///< N int64
  };

  std::vector<int64_t> sample_shape() const override {
    const auto s = train_.images.sizes();
    return {s[1], s[2], s[3]};
  }
  int64_t num_classes() const override { return classes_; }
  int64_t size(Split split) const override { return part(split).images.size(0); }

  Batch get(Split split, const at::Tensor& indices) const override {
    const Part& p = part(split);
    auto x = p.images.index_select(0, indices).to(torch::kFloat).div_(127.5).sub_(1.0);
    return {x, p.labels.index_select(0, indices)};
  }

 protected:
  explicit ByteImageDataset(int64_t classes) : classes_(classes) {}
  /// The splits, read by the subclass's constructor.
  void hold(Part train, Part test) {
    train_ = std::move(train);
    test_ = std::move(test);
  }

 private:
  const Part& part(Split split) const { return split == Split::train ? train_ : test_; }
  int64_t classes_;
  Part train_, test_;
};

}  // namespace htm
