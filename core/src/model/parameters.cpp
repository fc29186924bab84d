// Parameter counts of a model (model.h).
#include <torch/torch.h>

#include "model/model.h"

namespace htm {

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

int64_t participating_parameters(Model& model, const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                 const torch::Tensor& tree,
                                 const std::function<torch::Tensor(const ForwardResult&)>& also) {
  auto params = model.parameters();
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  const bool was_training = model.is_training();
  model.eval();  // no dropout draws
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  ForwardHooks hooks;
  hooks.tree = tree;
  auto out = model.forward(input, schedule, gen, &hooks);
  auto total = out.output.sum();
  auto log_prob = total_log_prob(out);
  if (log_prob.defined()) total = total + log_prob.sum();
  if (also) {
    auto more = also(out);
    if (more.defined()) total = total + more;
  }
  total.backward();
  model.train(was_training);
  int64_t n = 0;
  for (auto& p : params) {
    if (p.grad().defined()) n += p.numel();
    p.mutable_grad() = torch::Tensor();
  }
  return n;
}

}  // namespace htm
