// `htm bench --gradient-variance N`: how noisy a configuration's policy gradient is for what it
// costs (bench.cpp builds the experiment). The estimators differ in both: RLOO over 4 rollouts
// runs 4 sampled passes, a self-critical baseline one or more and a reference pass without
// backward, so a variance alone does not compare them; a variance at equal compute does.
#pragma once

#include <cstdint>
#include <string>

#include "train/experiment.h"

namespace htm::bench {

struct GradientNoise {
  int64_t draws = 0, parameters = 0, trained_steps = 0;
  double variance = 0;  ///< tr Σ: the sum over the policy's parameters of each one's variance across draws
  double mean_sq = 0;   ///< the squared norm of the mean gradient
  double ms = 0;        ///< the median time of one gradient (forward, objective, backward)
};

/// `trained_steps` ordinary training steps (the optimisers' too) on successive batches of the
/// training split, then `draws` gradients of one batch (`batch`), each from its own draws
/// (TrainStep::gradients: no update), read from the policy's parameters (the model's `policy.`
/// parameters that take a gradient). Throws htm::Error when the policy has none.
GradientNoise gradient_noise(Experiment& ex, const Batch& batch, int64_t draws, int64_t trained_steps);

/// The line: the variance, the mean's squared norm, the time, and variance × time, which is the
/// variance of a gradient averaged over a fixed budget of compute, times the budget (lower is
/// better at equal compute).
void print_gradient_noise(const std::string& what, const GradientNoise& g);

}  // namespace htm::bench
