#include "pairs_data.h"

#include <algorithm>
#include <cmath>

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

// R applied to a token's shared part: coordinates 2m and 2m+1 swapped for 2m + 1 < shared.
std::vector<double> reflect_shared(const std::vector<double>& token, int64_t shared) {
  std::vector<double> out = token;
  for (int64_t m = 0; m + 1 < shared; m += 2) std::swap(out[m], out[m + 1]);
  return out;
}

}  // namespace

PairsSample pairs_sample(const PairsParams& params, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = params.tokens, pairs = n / 2, features = params.shared + params.own;
  std::vector<std::vector<double>> drawn;  // token 2k is pair k's a, 2k + 1 its b
  for (int64_t k = 0; k < pairs; ++k) {
    std::vector<double> a(features);
    for (double& x : a) x = clipped_normal(rng, params.sd, params.clip);
    std::vector<double> b = reflect_shared(a, params.shared);
    for (int64_t d = params.shared; d < features; ++d) b[d] = clipped_normal(rng, params.sd, params.clip);
    drawn.push_back(std::move(a));
    drawn.push_back(std::move(b));
  }
  Merges merges;
  std::vector<int64_t> pair_nodes;
  for (int64_t k = 0; k < pairs; ++k) {
    merges.push_back({2 * k, 2 * k + 1});
    pair_nodes.push_back(n + k);
  }
  join_balanced(pair_nodes, n, merges);

  const auto perm = rng.permutation(n);
  PairsSample sample;
  sample.tokens.resize(n);
  for (int64_t i = 0; i < n; ++i) sample.tokens[perm[i]] = std::move(drawn[i]);
  sample.merges = relabel(merges, n, perm);
  return sample;
}

}  // namespace htm::data
