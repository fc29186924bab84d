// The form of the log-probabilities policies report, shared by the SDK and the host's settings
// without the weight of the torch headers.
#pragma once

namespace htm {

/// Which log-probability a policy reports for the decisions it sampled (`estimator.log_prob`).
enum class LogProbForm {
  /// Of what was actually drawn: each pair (token) under the softmax renormalised over the pairs
  /// (tokens) still allowed after the draws before it. Σ over a decision is its log-probability,
  /// so the score-function estimate is unbiased. A choice with only one outcome (unmerging all
  /// T of T tokens) has log-probability 0 and reports none.
  exact,
  /// The paper's (§3.1.5: "we optimise the original unconstrained distribution"): each pair under
  /// the softmax over all T(T−1) ordered pairs, each token under the softmax over all T. Biased:
  /// E[∇ Σ log p̃] ≠ 0. Kept for faithful reproduction.
  paper,
};

}  // namespace htm
