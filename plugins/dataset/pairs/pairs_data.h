// Hidden pairs (issue 63's benchmark): tokens in pairs whose partners are correlated but no more
// similar than strangers, so that no distance rule finds them while a symmetric bilinear score
// does; optionally nested (pairs of pairs, ...), each level hidden the same way. Plain C++ (no
// torch), so the generator is checked on its own; the pairs plugin wraps it.
#pragma once

#include <cstdint>
#include <vector>

#include "layout.h"  // plugins/dataset/trees: Merges, Rng, sample_seed, relabel

namespace htm::data {

struct PairsParams {
  int64_t tokens = 16;  ///< a multiple of 2^levels(): tokens / 2 hidden pairs
  int64_t shared = 14;  ///< coordinates a pair shares (through R), even
  int64_t own = 2;      ///< coordinates of each token alone
  double sd = 0.25;     ///< standard deviation of every coordinate before clipping
  double clip = 0.95;   ///< coordinates are clipped to [-clip, clip]
  /// Coordinates shared by each cluster above the pairs: entry l − 2 for the clusters of 2^l
  /// tokens (l = 2: quads, 3: octets, ...), each a multiple of 2^l. Empty: pairs only.
  std::vector<int64_t> upper;

  int64_t levels() const { return 1 + static_cast<int64_t>(upper.size()); }
  int64_t features() const;  ///< shared + the upper parts + own
};

/// One sample. Every part a cluster shares is drawn once, each coordinate N(0, sd²) clipped at
/// ±clip, and every member holds a permuted copy: for a cluster of 2^l tokens, member m (its
/// index in the cluster) holds at coordinate b·2^l + e the drawn value at b·2^l + (e xor m). Two
/// members' copies differ by a permutation without fixed points (R for a pair: coordinates 2m
/// and 2m+1 swapped, R = Rᵀ, R² = I), so they are uncorrelated, and any two members of a cluster
/// are related the same way whichever of them is which. A token is [pair part (`shared`); the
/// upper parts, lowest level first; own part]. With no upper parts: pair k's tokens are
/// a = [s; p] and b = [R s; q]. The tokens are shuffled. The true tree merges the partners first
/// (its first tokens/2 merges, in Batch::tree's canonical order), then the clusters level by
/// level, then the top clusters as a balanced tree in the order they were drawn, which carries
/// no information.
struct PairsSample {
  std::vector<std::vector<double>> tokens;  ///< tokens × features()
  Merges merges;
};
PairsSample pairs_sample(const PairsParams& params, uint64_t seed);

}  // namespace htm::data
