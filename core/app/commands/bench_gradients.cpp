#include "commands/bench_gradients.h"

#include <cstdio>
#include <vector>

#include <torch/torch.h>

#include "commands/bench_gemm.h"
#include "htm/error.h"
#include "train/step.h"

namespace htm::bench {

GradientNoise gradient_noise(Experiment& ex, const Batch& batch, int64_t draws, int64_t trained_steps) {
  if (draws < 2) throw Error("--gradient-variance " + std::to_string(draws) + ": needs at least 2 draws");
  if (trained_steps < 0) throw Error("--train-first " + std::to_string(trained_steps) + ": must be 0 or more");
  TrainStep train_step(ex, at::make_generator<at::CPUGeneratorImpl>(0));
  ex.model->train();
  StepRequest request;
  request.schedule = ex.schedule;
  request.batch_rows = batch.input.size(0);
  const int64_t available = ex.dataset->size(Split::train);
  for (; request.step < trained_steps; ++request.step) {
    const int64_t first = request.step * request.batch_rows;
    const auto indices = torch::arange(first, first + request.batch_rows) % available;
    request.batch = on_device(ex.dataset->get(Split::train, indices), ex.device);
    train_step(request);
  }
  request.batch = batch;
  std::vector<torch::Tensor> policy;
  for (const auto& p : ex.model->named_parameters())
    if (p.key().rfind("policy.", 0) == 0 && p.value().requires_grad()) policy.push_back(p.value());
  GradientNoise g;
  g.draws = draws;
  g.trained_steps = trained_steps;
  torch::Tensor sum, sum_sq;
  std::vector<double> ms;
  for (int64_t k = 0; k < draws; ++k) {
    ms.push_back(time_ms(1, [&] { train_step.gradients(request); })[0]);  // the gradient alone is timed
    std::vector<torch::Tensor> grads;
    for (const auto& p : policy)
      if (p.grad().defined())
        grads.push_back(p.grad().detach().to(torch::kCPU, torch::kDouble).flatten());  // host: summed there
    if (grads.empty()) throw Error("--gradient-variance: the policy has no parameter that takes a gradient");
    const auto flat = torch::cat(grads);
    sum = sum.defined() ? sum + flat : flat.clone();
    sum_sq = sum_sq.defined() ? sum_sq + flat * flat : flat * flat;
  }
  const double n = static_cast<double>(draws);
  const auto mean = sum / n;
  g.parameters = sum.numel();
  g.variance = ((sum_sq - n * mean * mean) / (n - 1)).sum().item<double>();
  g.mean_sq = (mean * mean).sum().item<double>();
  g.ms = median(ms);
  return g;
}

void print_gradient_noise(const std::string& what, const GradientNoise& g) {
  std::printf(
      "gradient %-28s policy: %lld parameters, %lld draws of one batch after %lld steps: variance (tr S) %.4g, "
      "|mean|^2 %.4g, %.1f ms a gradient (median), variance x ms %.4g\n",
      what.c_str(), (long long)g.parameters, (long long)g.draws, (long long)g.trained_steps, g.variance, g.mean_sq,
      g.ms, g.variance * g.ms);
}

}  // namespace htm::bench
