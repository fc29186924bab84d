#include "pairs_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace htm::data {
namespace {

// N(0, sd²) clipped at ±clip, by Box–Muller on the Rng's uniforms: the same on every library.
double clipped_normal(Rng& rng, double sd, double clip) {
  const double u = rng.uniform(0, 1), v = rng.uniform(0, 1);
  const double z = std::sqrt(-2.0 * std::log(1.0 - u)) * std::cos(2.0 * M_PI * v);
  return std::clamp(sd * z, -clip, clip);
}

// Nodes `nodes` joined as a balanced binary tree (halves first), appended to `merges`; node ids
// of internal nodes are leaves + the row index. Returns the root.
int64_t join_balanced(const std::vector<int64_t>& nodes, int64_t leaves, Merges& merges) {
  if (nodes.size() == 1) return nodes[0];
  const std::vector<int64_t> left(nodes.begin(), nodes.begin() + (nodes.size() + 1) / 2),
      right(nodes.begin() + (nodes.size() + 1) / 2, nodes.end());
  const int64_t a = join_balanced(left, leaves, merges), b = join_balanced(right, leaves, merges);
  merges.push_back({a, b});
  return leaves + static_cast<int64_t>(merges.size()) - 1;
}

// A part shared by a cluster of 2^level tokens, drawn.
std::vector<double> draw_part(int64_t size, const PairsParams& p, Rng& rng) {
  std::vector<double> part(size);
  for (double& x : part) x = clipped_normal(rng, p.sd, p.clip);
  return part;
}

// Member m's copy of a part shared by a cluster of 2^level tokens, written from `out` on:
// coordinate b·2^level + e holds part[b·2^level + (e xor m)].
void copy_part(const std::vector<double>& part, int64_t level, int64_t m, double* out) {
  const int64_t low = (int64_t{1} << level) - 1;
  for (int64_t c = 0; c < static_cast<int64_t>(part.size()); ++c) out[c] = part[(c & ~low) | ((c & low) ^ m)];
}

// The cluster of 2^level tokens from drawn[first] on: its part, then its two halves (a pair: its
// shared part, then each token's own part).
void draw_cluster(int64_t level, int64_t first, const PairsParams& p, Rng& rng,
                  std::vector<std::vector<double>>& drawn) {
  if (level == 1) {
    const auto s = draw_part(p.shared, p, rng);
    for (int64_t m = 0; m < 2; ++m) copy_part(s, 1, m, drawn[first + m].data());
    const int64_t features = p.features();
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t d = features - p.own; d < features; ++d) drawn[first + m][d] = clipped_normal(rng, p.sd, p.clip);
    return;
  }
  const int64_t offset = p.shared + std::accumulate(p.upper.begin(), p.upper.begin() + level - 2, int64_t{0});
  const auto part = draw_part(p.upper[level - 2], p, rng);
  for (int64_t m = 0; m < (int64_t{1} << level); ++m) copy_part(part, level, m, drawn[first + m].data() + offset);
  draw_cluster(level - 1, first, p, rng, drawn);
  draw_cluster(level - 1, first + (int64_t{1} << (level - 1)), p, rng, drawn);
}

}  // namespace

int64_t PairsParams::features() const { return shared + std::accumulate(upper.begin(), upper.end(), int64_t{0}) + own; }

PairsSample pairs_sample(const PairsParams& params, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = params.tokens, cluster = int64_t{1} << params.levels();
  // Drawn order: top cluster c's member m is token c·2^levels + m, so a pair is 2k, 2k + 1.
  std::vector<std::vector<double>> drawn(n, std::vector<double>(params.features()));
  for (int64_t first = 0; first < n; first += cluster) draw_cluster(params.levels(), first, params, rng, drawn);
  Merges merges;
  std::vector<int64_t> nodes(n);
  std::iota(nodes.begin(), nodes.end(), int64_t{0});
  for (int64_t level = 1; level <= params.levels(); ++level) {
    std::vector<int64_t> joined;
    for (size_t k = 0; k + 1 < nodes.size(); k += 2) {
      merges.push_back({nodes[k], nodes[k + 1]});
      joined.push_back(n + static_cast<int64_t>(merges.size()) - 1);
    }
    nodes = std::move(joined);
  }
  join_balanced(nodes, n, merges);

  const auto perm = rng.permutation(n);
  PairsSample sample;
  sample.tokens.resize(n);
  for (int64_t i = 0; i < n; ++i) sample.tokens[perm[i]] = std::move(drawn[i]);
  sample.merges = relabel(merges, n, perm);
  return sample;
}

}  // namespace htm::data
