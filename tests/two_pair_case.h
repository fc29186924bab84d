// A case small enough to enumerate, shared by the estimator's tests: T = 4 tokens, r = 2 pairs,
// 12 · 2 = 24 ordered draws. The loss depends on the set of pairs drawn (not their order), as a
// model's reconstruction does.
#pragma once

#include <torch/torch.h>

#include "htm/policy.h"

namespace htm::testing {

struct TwoPairCase {
  torch::Tensor theta;     // 1×4×4, the policy's parameters
  torch::Tensor cost;      // 16: a cost per ordered pair; the loss of a draw is the sum over its pairs
  torch::Tensor src, dst;  // 24×2: every ordered draw
};

inline TwoPairCase two_pair_case() {
  torch::manual_seed(31);
  TwoPairCase c{(1.5 * torch::randn({1, 4, 4}, torch::kDouble)).requires_grad_(true),
                torch::rand({16}, torch::kDouble) * 4.0,
                {},
                {}};
  std::vector<int64_t> s, d;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t l = 0; l < 4; ++l)
          if (i != j && k != l && k != i && k != j && l != i && l != j)
            s.insert(s.end(), {i, k}), d.insert(d.end(), {j, l});
  c.src = torch::tensor(s).view({-1, 2});
  c.dst = torch::tensor(d).view({-1, 2});
  return c;
}

inline torch::Tensor draw_loss(const TwoPairCase& c, const torch::Tensor& src, const torch::Tensor& dst) {
  return c.cost.index_select(0, (src * 4 + dst).view(-1)).view(src.sizes()).sum(1);
}

// E[g] = Σ over the 24 draws of p(draw) g(draw), p from the exact log-probability.
inline torch::Tensor expected_loss(const TwoPairCase& c, const torch::Tensor& theta) {
  auto logits = theta.expand({c.src.size(0), 4, 4});
  auto p = pair_log_prob(logits, c.src, c.dst, LogProbForm::exact).sum(1).exp();
  return (p * draw_loss(c, c.src, c.dst)).sum();
}

// Central differences of E[g] in each of the 12 off-diagonal logits (4×4).
inline torch::Tensor finite_difference_gradient(const TwoPairCase& c) {
  auto fd = torch::zeros({4, 4}, torch::kDouble);
  const double h = 1e-5;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      if (i == j) continue;
      auto up = c.theta.detach().clone(), down = c.theta.detach().clone();
      up[0][i][j] += h;
      down[0][i][j] -= h;
      fd[i][j] = (expected_loss(c, up) - expected_loss(c, down)).item<double>() / (2 * h);
    }
  return fd;
}

}  // namespace htm::testing
