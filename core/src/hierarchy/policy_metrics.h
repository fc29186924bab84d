// How much a merge policy depends on its input (paper §4.3, Figure 4: "the merging policy for
// different images is, effectively, the same").
#pragma once

#include <torch/types.h>

namespace htm {

/// Two numbers about a batch of first-layer merge policies, each row i read as the distribution
/// of token i's partner, p_n(j | i) = softmax_j≠i(logits[n, i, j]).
struct PolicySpread {
  /// Mean over pairs of inputs (a, b) and rows i of TV(p_a(·|i), p_b(·|i)), in [0, 1]: the
  /// probability mass that must move to turn one input's policy into another's. 0: the same
  /// policy for every input; 1: disjoint choices.
  double variation = 0;
  /// Mean over rows i of TV(p̄(·|i), uniform), p̄ the policy averaged over inputs, in [0, 1):
  /// how far the shared part of the policy is from the uniform-random one.
  double structure = 0;
};

/// logits: N×T×T (N ≥ 2 inputs; diagonal ignored).
PolicySpread policy_spread(const torch::Tensor& logits);

}  // namespace htm
