#include "hierarchy/policy_metrics.h"

#include <limits>

#include <torch/torch.h>

#include "htm/error.h"

namespace htm {

PolicySpread policy_spread(const torch::Tensor& logits) {
  if (logits.dim() != 3 || logits.size(1) != logits.size(2) || logits.size(0) < 2 || logits.size(1) < 2)
    throw Error("policy_spread expects N×T×T logits with N ≥ 2 and T ≥ 2, got " + c10::str(logits.sizes()));
  torch::NoGradGuard no_grad;
  const int64_t N = logits.size(0), T = logits.size(1);
  auto eye = torch::eye(T, torch::kBool);
  auto host = logits.to(torch::kCPU, torch::kDouble);  // host: a measure of a few test inputs
  auto p = torch::softmax(host.masked_fill(eye, -std::numeric_limits<double>::infinity()), 2);
  double variation = 0;
  for (int64_t i = 0; i < T; ++i) {
    auto rows = p.select(1, i);               // N×T, one input per row
    auto l1 = torch::cdist(rows, rows, 1.0);  // N×N
    variation += 0.5 * l1.sum().item<double>() / static_cast<double>(N * (N - 1));
  }
  auto uniform = torch::full({T, T}, 1.0 / static_cast<double>(T - 1), torch::kDouble).masked_fill(eye, 0.0);
  PolicySpread spread;
  spread.variation = variation / static_cast<double>(T);
  spread.structure = 0.5 * (p.mean(0) - uniform).abs().sum(1).mean().item<double>();
  return spread;
}

}  // namespace htm
