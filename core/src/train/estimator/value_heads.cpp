#include "train/estimator/value_heads.h"

#include <torch/torch.h>

namespace htm {

ValueHeadsImpl::ValueHeadsImpl(int64_t dim) {
  for (int i = 0; i < 2; ++i) {
    auto out = torch::nn::Linear(dim, 1);
    torch::NoGradGuard no_grad;
    out->weight.zero_();  // starts at the constant 0: no baseline until it has learned one
    out->bias.zero_();
    heads_[i] = register_module(i == 0 ? "merge" : "unmerge",
                                torch::nn::Sequential(torch::nn::Linear(2 * dim, dim), torch::nn::GELU(), out));
  }
}

torch::Tensor ValueHeadsImpl::forward(const torch::Tensor& tokens, bool unmerge) {
  // The population's mean and its spread per channel: a set summary that sees how far apart the
  // tokens still are, whatever their number.
  auto x = torch::layer_norm(tokens.detach(), {tokens.size(2)});
  auto pooled = torch::cat({x.mean(1), x.std(1, /*unbiased=*/false)}, 1);
  return heads_[unmerge ? 1 : 0]->forward(pooled).squeeze(1);
}

}  // namespace htm
