#include "model/vit.h"

#include <torch/torch.h>

namespace htm {

VitImpl::VitImpl(const VitOptions& options, std::shared_ptr<Adapter> adapter) {
  const int64_t C = options.block.dim;
  adapter_ = register_module("adapter", std::move(adapter));
  cls_ = register_parameter("cls", torch::randn({1, 1, C}) * 0.02);
  for (int64_t l = 0; l < options.layers; ++l)
    blocks_.push_back(register_module("block" + std::to_string(l), TransformerBlock(options.block)));
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  head_ = register_module("head", Linear(C, options.classes));
}

ForwardResult VitImpl::forward(const torch::Tensor& input, const std::vector<int64_t>&, at::Generator,
                               const ForwardHooks*) {
  auto x = adapter_->lift(input);  // B×T×C, position already in the lifted features
  x = torch::cat({cls_.expand({x.size(0), 1, x.size(2)}), x}, 1);
  for (auto& block : blocks_) x = block->forward(x);
  ForwardResult result;
  result.root = x.narrow(1, 0, 1);
  result.output = head_->forward(norm_->forward(x.select(1, 0)));
  return result;
}

}  // namespace htm
