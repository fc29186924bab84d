// Generated point sets with a known hierarchy (HTM slides: Trees and Crosses): a balanced binary
// tree laid out in the plane like an H-tree, sibling distances shrinking by level. Plain C++ (no
// torch) so the generator can be checked on its own; the trees and crosses plugins wrap it.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace htm::data {

using Point = std::array<double, 2>;
using Segment = std::array<double, 4>;  ///< x1, y1, x2, y2 with (x1, y1) ≤ (x2, y2)
/// Merges as in Batch::tree: leaves 0..n−1, row k holds the children of node n+k, children before
/// parents, rows ordered by height (then by children), the smaller child first.
using Merges = std::vector<std::array<int64_t, 2>>;

/// The samples' random stream: sample `index` of `split` (0 train, 1 test) draws from a generator
/// seeded by SplitMix64 over (seed, split, index), so it never depends on the other samples.
uint64_t sample_seed(int64_t seed, int split, int64_t index);

/// Draws that are the same on every standard library (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  double uniform(double lo, double hi);
  int64_t below(int64_t n);  ///< uniform in [0, n)
  std::vector<int64_t> permutation(int64_t n);

 private:
  std::mt19937_64 engine_;
};

struct LayoutParams {
  double shrink = 0.55;        ///< sibling distance factor per tree level, in (0, 1)
  double angle_jitter = 15.0;  ///< degrees, per internal node
};

/// A balanced full binary tree over n ≥ 1 leaves (⌈n/2⌉ left, ⌊n/2⌋ right, recursively) laid out
/// with its root at the origin: an internal node at depth k puts its subtrees at ±shrink^k/2
/// along θ0 + k·90° + jitter. Leaves are in left-to-right order; merges are canonical.
struct Layout {
  std::vector<Point> leaves;
  Merges merges;
  double deepest_distance = 0;  ///< sibling distance at the deepest internal node's depth
};
Layout balanced_layout(int64_t n, const LayoutParams& params, Rng& rng);

/// Scales (by 60–100 % of the largest factor that fits, or not at all when !rescale) and
/// translates all points at random so every coordinate lies in [−0.95, 0.95].
void fit_into_box(std::vector<Point>& points, Rng& rng, bool rescale = true);

/// The merges after leaf i becomes leaf new_id[i], in the canonical order of Merges. The input
/// only needs children before parents.
Merges relabel(const Merges& merges, int64_t leaves, const std::vector<int64_t>& new_id);

struct TreeSample {
  std::vector<Point> leaves;
  Merges merges;
};
/// Trees: the laid-out leaves, fitted into the box, in a random order.
TreeSample tree_sample(int64_t tokens, const LayoutParams& params, uint64_t seed);

/// Mirrored trees: a Trees sample in which one leaf of every pair of sibling leaves, chosen by a
/// fair coin, is stored reflected through the origin, (x, y) → (−x, −y), with a third coordinate
/// s = −1 (s = +1 on every other leaf). s·(x, y) is the Trees sample of the same seed, exactly.
/// With `exact`, the reflected leaf is instead its sibling's exact mirror image, (−x, −y) of the
/// sibling, so a pair of sibling leaves holds one point's information.
struct MirroredSample {
  std::vector<std::array<double, 3>> tokens;  ///< x, y, s
  Merges merges;
};
MirroredSample mirrored_sample(int64_t tokens, const LayoutParams& params, uint64_t seed, bool exact = false);

struct CrossParams {
  LayoutParams layout;
  double min_angle = 30.0;  ///< degrees between a cross's two segments, in (0, 90]
};
struct CrossSample {
  std::vector<Segment> segments;  ///< 2·crosses
  Merges merges;
};
/// Crosses: one cross (two segments sharing their midpoint) at each leaf of the balanced layout;
/// the truth joins each cross's segments first, then the crosses along the layout tree.
CrossSample cross_sample(int64_t crosses, const CrossParams& params, uint64_t seed);

}  // namespace htm::data
