// Hidden pairs (issue 63's benchmark): tokens in pairs whose partners are correlated but no more
// similar than strangers, so that no distance rule finds them while a symmetric bilinear score
// does. Plain C++ (no torch), so the generator is checked on its own; the pairs plugin wraps it.
#pragma once

#include <cstdint>
#include <vector>

#include "layout.h"  // plugins/dataset/trees: Merges, Rng, sample_seed, relabel

namespace htm::data {

struct PairsParams {
  int64_t tokens = 16;  ///< even: tokens / 2 hidden pairs
  int64_t shared = 14;  ///< coordinates a pair shares (through R), even
  int64_t own = 2;      ///< coordinates of each token alone
  double sd = 0.25;     ///< standard deviation of every coordinate before clipping
  double clip = 0.95;   ///< coordinates are clipped to [-clip, clip]
};

/// One sample: pair k draws a shared part s (`shared` coordinates) and own parts p, q (`own`
/// each), every coordinate N(0, sd²) clipped at ±clip; its tokens are a = [s; p] and
/// b = [R s; q], where R swaps coordinates 2m and 2m+1 of the shared part (a reflection in each
/// of shared/2 coordinate planes: R = Rᵀ, R² = I, so either token of a pair is the other's
/// partner in the same way). The tokens are shuffled. The true tree merges the partners first
/// (its first tokens/2 merges, in Batch::tree's canonical order), then the pairs as a balanced
/// tree in the order they were drawn, which carries no information.
struct PairsSample {
  std::vector<std::vector<double>> tokens;  ///< tokens × (shared + own)
  Merges merges;
};
PairsSample pairs_sample(const PairsParams& params, uint64_t seed);

}  // namespace htm::data
