// The ViT baseline of §4.1: the same lifted tokens (the adapter's lifter) and a learned class
// token through ordinary transformer blocks with untied weights, then a linear head.
#pragma once

#include <memory>

#include "model/model.h"

namespace htm {

struct VitOptions {
  ModelOptions block;  ///< width, heads, MLP ratio and dropout of every block
  int64_t layers = 8;
  int64_t classes = 10;
};

class VitImpl : public Model {
 public:
  VitImpl(const VitOptions& options, std::shared_ptr<Adapter> adapter);
  /// `schedule` is ignored: a ViT keeps every token. output is B×classes logits.
  ForwardResult forward(const torch::Tensor& input, const std::vector<int64_t>& schedule, at::Generator generator,
                        const ForwardHooks* hooks = nullptr) override;

 private:
  std::shared_ptr<Adapter> adapter_;
  torch::Tensor cls_;
  std::vector<TransformerBlock> blocks_;
  torch::nn::LayerNorm norm_{nullptr};
  Linear head_{nullptr};
};
TORCH_MODULE(Vit);

}  // namespace htm
