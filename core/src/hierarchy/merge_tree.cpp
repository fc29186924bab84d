// Merge trees: checks, sibling and cluster scores, schedule feasibility, and the agglomerative
// (ceiling) and random (floor) baselines. See merge_tree.h for the conventions.
#include "hierarchy/merge_tree.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "htm/error.h"

namespace htm {
namespace {

using Pair = std::array<int64_t, 2>;

std::string str(int64_t v) { return std::to_string(v); }

// Every merge joins two distinct nodes that exist before it, and no node is a child twice.
void check_merges(int64_t leaves, const std::vector<Pair>& merges, const std::string& what) {
  if (leaves < 0) throw Error(what + " has a negative number of leaves (" + str(leaves) + ")");
  std::vector<char> used(leaves + merges.size(), 0);
  for (size_t k = 0; k < merges.size(); ++k) {
    const int64_t node = leaves + static_cast<int64_t>(k);
    // The message is made only for a merge that fails: scoring checks every tree it scores.
    const auto at = [&] { return what + " merge " + str(k) + " (node " + str(node) + ")"; };
    if (merges[k][0] == merges[k][1]) throw Error(at() + " merges node " + str(merges[k][0]) + " with itself");
    for (int64_t c : merges[k]) {
      if (c < 0 || c >= node) throw Error(at() + " uses node " + str(c) + ", which does not exist before it");
      if (used[c]) throw Error(at() + " uses node " + str(c) + ", which an earlier merge used");
      used[c] = 1;
    }
  }
}

void check_tree(const MergeTree& t, const std::string& what) {
  check_merges(t.leaves, t.merges, what);
  if (t.layer.size() != t.merges.size())
    throw Error(what + " has " + str(t.merges.size()) + " merges but " + str(t.layer.size()) + " layers");
}

void check_same_leaves(const MergeTree& predicted, const MergeTree& truth) {
  check_tree(predicted, "the predicted tree");
  check_tree(truth, "the true tree");
  if (predicted.leaves != truth.leaves)
    throw Error("the predicted tree has " + str(predicted.leaves) + " leaves but the true tree " + str(truth.leaves));
}

void check_schedule_entries(const std::vector<int64_t>& schedule) {
  for (size_t l = 0; l < schedule.size(); ++l)
    if (schedule[l] < 0)
      throw Error("merging schedule layer " + str(l + 1) + " asks for " + str(schedule[l]) +
                  " merges; a layer merges zero or more pairs");
}

void check_room(size_t l, int64_t pairs, size_t clusters) {
  if (2 * pairs > static_cast<int64_t>(clusters))
    throw Error("merging schedule layer " + str(l + 1) + " asks for " + str(pairs) + " pairs but only " +
                str(clusters) + " clusters are left");
}

Scores score(size_t hits, size_t predicted, size_t truth) {
  Scores s;
  s.precision = predicted ? static_cast<double>(hits) / predicted : 0.0;
  s.recall = truth ? static_cast<double>(hits) / truth : 0.0;
  const double sum = s.precision + s.recall;
  s.f1 = sum > 0 ? 2 * s.precision * s.recall / sum : 0.0;
  return s;
}

template <class Set>
size_t common(const Set& a, const Set& b) {
  size_t n = 0;
  for (const auto& x : a) n += b.count(x);
  return n;
}

Pair unordered(Pair p) { return {std::min(p[0], p[1]), std::max(p[0], p[1])}; }

// The leaf set of every internal node, without the set of all leaves (a full tree's root).
std::set<std::vector<int64_t>> clusters(const MergeTree& t) {
  std::vector<std::vector<int64_t>> under(t.merges.size());
  std::set<std::vector<int64_t>> out;
  for (size_t k = 0; k < t.merges.size(); ++k) {
    auto leaves_of = [&](int64_t c) { return c < t.leaves ? std::vector<int64_t>{c} : under[c - t.leaves]; };
    const auto a = leaves_of(t.merges[k][0]), b = leaves_of(t.merges[k][1]);
    std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(under[k]));
    if (static_cast<int64_t>(under[k].size()) != t.leaves) out.insert(under[k]);
  }
  return out;
}

// The same leaf sets as bit masks, sorted, where a tree has at most 64 leaves (all htm's data
// make): an evaluation scores every sample of every batch, and a set of vectors a tree was most
// of its time.
std::vector<uint64_t> cluster_masks(const MergeTree& t) {
  std::vector<uint64_t> under(t.merges.size()), out;
  const uint64_t all = t.leaves == 64 ? ~uint64_t{0} : (uint64_t{1} << t.leaves) - 1;
  const auto mask = [&](int64_t c) { return c < t.leaves ? uint64_t{1} << c : under[c - t.leaves]; };
  for (size_t k = 0; k < t.merges.size(); ++k) {
    under[k] = mask(t.merges[k][0]) | mask(t.merges[k][1]);
    if (under[k] != all) out.push_back(under[k]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The elements two sorted, duplicate-free vectors share.
template <class T>
size_t common_sorted(const std::vector<T>& a, const std::vector<T>& b) {
  size_t n = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] < b[j])
      ++i;
    else if (b[j] < a[i])
      ++j;
    else
      ++n, ++i, ++j;
  }
  return n;
}

// Unbiased draw in [0, bound), written out so a seed gives the same tree with any standard library.
uint64_t below(uint64_t bound, std::mt19937_64& rng) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound: the biased low values
  for (;;) {
    const uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

// A shape's canonical code: "(" + its children's codes in sorted order + ")".
std::string shape_code(std::vector<std::string> children) {
  std::sort(children.begin(), children.end());
  std::string code = "(";
  for (const std::string& c : children) code += c;
  return code + ")";
}

// The exact answer where the greedy fails. Once built, a node's identity stops mattering: only
// the shape of the unbuilt part does (a forest whose leaves are the ready nodes), so a state is
// that forest's shape_code under a top node, and isomorphic choices are tried once.
// The last two layers need no search (see completions). kMaxWork bounds the rest: past it the
// search gives up and answers false.
class ShapeSearch {
 public:
  explicit ShapeSearch(const std::vector<int64_t>& schedule) : schedule_(schedule) {}
  bool reaches(size_t layer, const std::string& top) {
    const size_t left = schedule_.size() - layer;
    const int64_t now = top == "()" ? 0 : ready(top);  // the top itself is never built
    if (left == 0) return true;
    if (now < schedule_[layer]) return false;
    if (left == 1) return true;
    if (left == 2) {
      const int64_t r = schedule_[layer];
      return now - r + completions(top, r) >= schedule_[layer + 1];
    }
    if (work_ > kMaxWork || failed_.count({layer, top})) return false;
    for (const std::string& next : after(top, schedule_[layer], false))
      if (reaches(layer + 1, next)) return true;
    failed_.insert({layer, top});
    return false;
  }

 private:
  static constexpr size_t kMaxWork = 4000000;  // characters copied: a few hundredths of a second

  // Ready nodes are the unbuilt nodes without unbuilt children, written "()".
  static int64_t ready(const std::string& code) {
    int64_t n = 0;
    for (size_t i = 0; i + 1 < code.size(); ++i) n += code[i] == '(' && code[i + 1] == ')';
    return n;
  }

  // The most nodes that building k ready nodes can make ready: an unbuilt node whose unbuilt
  // children are all ready needs one or two of them built, so those needing one go first. The
  // rest of the k come from any other ready nodes, which exist since k ≤ ready(top).
  static int64_t completions(const std::string& top, int64_t k) {
    int64_t need[3] = {0, 0, 0};
    std::vector<std::array<int64_t, 2>> open;  // per open node: children, ready children
    for (char c : top) {
      if (c == '(') {
        open.push_back({0, 0});
        continue;
      }
      const auto node = open.back();
      open.pop_back();
      if (open.empty()) break;  // the top is never built
      open.back()[0] += 1;
      open.back()[1] += node[0] == 0;
      if (node[0] > 0 && node[0] == node[1]) ++need[node[0]];
    }
    const int64_t ones = std::min(k, need[1]);
    return ones + std::min(need[2], (k - ones) / 2);
  }

  static std::vector<std::string> children(const std::string& code) {
    std::vector<std::string> out;
    for (size_t i = 1, depth = 0, start = 1; i + 1 < code.size(); ++i) {
      depth += code[i] == '(' ? 1 : -1;
      if (depth == 0) out.push_back(code.substr(start, i + 1 - start)), start = i + 1;
    }
    return out;
  }

  // The shapes left after building exactly k ready nodes under `code` ("" once it is built).
  const std::set<std::string>& after(const std::string& code, int64_t k, bool removable) {
    auto [it, fresh] = memo_.try_emplace({code, k, removable});
    if (!fresh) return it->second;
    std::set<std::string>& out = it->second;
    const auto kids = children(code);
    if (k > ready(code) || work_ > kMaxWork) return out;  // too few ready nodes; or given up
    if (kids.empty()) {
      if (k == 0) out.insert(code);
      if (k == 1 && removable) out.insert("");
      return out;
    }
    std::vector<std::set<std::vector<std::string>>> acc(k + 1);  // built count -> child shapes
    acc[0].insert(std::vector<std::string>{});
    for (const std::string& kid : kids) {
      std::vector<std::set<std::vector<std::string>>> next(k + 1);
      for (int64_t k1 = 0; k1 <= k; ++k1)
        for (int64_t k2 = 0; k1 + k2 <= k && !acc[k1].empty() && work_ <= kMaxWork; ++k2)
          for (const std::string& shape : after(kid, k2, true))
            for (std::vector<std::string> list : acc[k1]) {
              if (!shape.empty()) list.insert(std::upper_bound(list.begin(), list.end(), shape), shape);
              next[k1 + k2].insert(std::move(list));
              work_ += code.size();  // about the characters copied
            }
      acc = std::move(next);
    }
    for (const auto& list : acc[k]) out.insert(shape_code(list));
    return out;
  }

  const std::vector<int64_t>& schedule_;
  std::map<std::tuple<std::string, int64_t, bool>, std::set<std::string>> memo_;
  std::set<std::pair<size_t, std::string>> failed_;
  size_t work_ = 0;
};

}  // namespace

void check_merge_tree(const MergeTree& tree, const std::string& what) { check_tree(tree, what); }

MergeTree tree_from_merges(int64_t leaves, const std::vector<std::array<int64_t, 2>>& merges) {
  check_merges(leaves, merges, "the tree");
  MergeTree t{leaves, merges, std::vector<int64_t>(merges.size())};
  auto height = [&](int64_t node) { return node < leaves ? 0 : t.layer[node - leaves]; };
  for (size_t k = 0; k < merges.size(); ++k) t.layer[k] = 1 + std::max(height(merges[k][0]), height(merges[k][1]));
  return t;
}

Scores sibling_scores(const MergeTree& predicted, const MergeTree& truth) {
  check_same_leaves(predicted, truth);
  const int64_t n = truth.leaves;
  std::vector<Pair> pred, real;  // sorted and without repeats: sets
  for (size_t k = 0; k < predicted.merges.size(); ++k) {
    const Pair p = predicted.merges[k];
    if (predicted.layer[k] == 1 && p[0] < n && p[1] < n) pred.push_back(unordered(p));
  }
  for (const Pair& p : truth.merges)
    if (p[0] < n && p[1] < n) real.push_back(unordered(p));
  for (auto* pairs : {&pred, &real}) {
    std::sort(pairs->begin(), pairs->end());
    pairs->erase(std::unique(pairs->begin(), pairs->end()), pairs->end());
  }
  return score(common_sorted(pred, real), pred.size(), real.size());
}

Scores cluster_scores(const MergeTree& predicted, const MergeTree& truth) {
  check_same_leaves(predicted, truth);
  if (truth.leaves <= 64) {
    const auto pred = cluster_masks(predicted), real = cluster_masks(truth);
    if (pred.empty() && real.empty()) return {1.0, 1.0, 1.0};
    return score(common_sorted(pred, real), pred.size(), real.size());
  }
  const auto pred = clusters(predicted), real = clusters(truth);
  if (pred.empty() && real.empty()) return {1.0, 1.0, 1.0};
  return score(common(pred, real), pred.size(), real.size());
}

bool schedule_reaches(const MergeTree& truth, const std::vector<int64_t>& schedule) {
  check_tree(truth, "the true tree");
  check_schedule_entries(schedule);
  const int64_t n = truth.leaves, m = static_cast<int64_t>(truth.merges.size());
  // level = edges up to the node's root; parents come after children, so fill from the end.
  std::vector<int64_t> parent(m, -1), level(m, 0);
  for (int64_t k = 0; k < m; ++k)
    for (int64_t c : truth.merges[k])
      if (c >= n) parent[c - n] = k;
  for (int64_t k = m - 1; k >= 0; --k) level[k] = parent[k] < 0 ? 0 : level[parent[k]] + 1;

  // Highest level first: fast, and a success is a proof; a failure is only a hint (its choice
  // can leave too few ready nodes for a later layer), so then the exact search decides.
  std::vector<char> made(m, 0);
  auto present = [&](int64_t node) { return node < n || made[node - n]; };
  bool greedy = true;
  for (size_t l = 0; l < schedule.size() && greedy; ++l) {
    std::vector<int64_t> ready;  // collected before any of this layer's merges is made
    for (int64_t k = 0; k < m; ++k)
      if (!made[k] && present(truth.merges[k][0]) && present(truth.merges[k][1])) ready.push_back(k);
    greedy = static_cast<int64_t>(ready.size()) >= schedule[l];
    std::stable_sort(ready.begin(), ready.end(), [&](int64_t a, int64_t b) { return level[a] > level[b]; });
    for (int64_t i = 0; greedy && i < schedule[l]; ++i) made[ready[i]] = 1;
  }
  if (greedy) return true;

  std::vector<std::string> code(m), roots;
  for (int64_t k = 0; k < m; ++k) {
    std::vector<std::string> kids;
    for (int64_t c : truth.merges[k])
      if (c >= n) kids.push_back(code[c - n]);
    code[k] = shape_code(kids);
    if (parent[k] < 0) roots.push_back(code[k]);
  }
  return ShapeSearch(schedule).reaches(0, shape_code(roots));  // a top node, never built
}

MergeTree agglomerative_merges(const std::vector<std::array<double, 2>>& positions,
                               const std::vector<int64_t>& schedule) {
  std::vector<std::vector<double>> rows;
  for (const auto& p : positions) rows.push_back({p[0], p[1]});
  return rule_merges(rows, schedule, PairRule::closest);  // the same sums, in the same order
}

const char* pair_rule_name(PairRule rule) {
  switch (rule) {
    case PairRule::closest:
      return "nearest";
    case PairRule::farthest:
      return "farthest";
    case PairRule::cosine:
      return "cosine";
    case PairRule::anticosine:
      return "anticosine";
    case PairRule::tome:
      return "tome";
  }
  return "?";
}

MergeTree rule_merges(const std::vector<std::vector<double>>& features, const std::vector<int64_t>& schedule,
                      PairRule rule) {
  check_schedule_entries(schedule);
  struct Cluster {
    int64_t node;
    std::vector<double> sum;  // of its leaves' rows; the centroid is sum / count
    int64_t count;
  };
  const size_t width = features.empty() ? 0 : features[0].size();
  MergeTree t;
  t.leaves = static_cast<int64_t>(features.size());
  std::vector<Cluster> current;  // always in increasing node id
  for (int64_t i = 0; i < t.leaves; ++i) {
    if (features[i].size() != width) throw Error("rule_merges: every token needs " + str(width) + " features");
    current.push_back({i, features[i], 1});
  }
  const auto score = [&](const Cluster& a, const Cluster& b) {  // higher merges first
    double dot = 0, aa = 0, bb = 0, d2 = 0;
    for (size_t k = 0; k < width; ++k) {
      const double x = a.sum[k] / a.count, y = b.sum[k] / b.count;
      dot += x * y, aa += x * x, bb += y * y, d2 += (x - y) * (x - y);
    }
    const double cosine = dot / std::max(1e-12, std::sqrt(aa * bb));
    switch (rule) {
      case PairRule::closest:
        return -d2;
      case PairRule::farthest:
        return d2;
      case PairRule::anticosine:
        return -cosine;
      default:
        return cosine;
    }
  };
  for (size_t l = 0; l < schedule.size(); ++l) {
    check_room(l, schedule[l], current.size());
    if (schedule[l] == 0) continue;
    struct Candidate {
      bool preferred;  // ToMe: an A–B pair
      double score;
      size_t i, j;
    };
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < current.size(); ++i)
      for (size_t j = i + 1; j < current.size(); ++j)
        candidates.push_back({rule != PairRule::tome || (i + j) % 2 == 1, score(current[i], current[j]), i, j});
    std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return a.preferred != b.preferred ? a.preferred : a.score > b.score;
    });
    std::vector<char> used(current.size(), 0);
    std::vector<Cluster> made;
    for (const Candidate& c : candidates) {
      if (static_cast<int64_t>(made.size()) == schedule[l]) break;
      if (used[c.i] || used[c.j]) continue;
      used[c.i] = used[c.j] = 1;
      const Cluster &a = current[c.i], &b = current[c.j];
      t.merges.push_back({a.node, b.node});
      t.layer.push_back(static_cast<int64_t>(l) + 1);
      Cluster joined{t.leaves + static_cast<int64_t>(t.merges.size()) - 1, a.sum, a.count + b.count};
      for (size_t k = 0; k < width; ++k) joined.sum[k] += b.sum[k];
      made.push_back(std::move(joined));
    }
    std::vector<Cluster> next;
    for (size_t i = 0; i < current.size(); ++i)
      if (!used[i]) next.push_back(std::move(current[i]));
    for (auto& m : made) next.push_back(std::move(m));  // new ids exceed all old ones
    current = std::move(next);
  }
  return t;
}

MergeTree random_merges(int64_t leaves, const std::vector<int64_t>& schedule, std::mt19937_64& rng) {
  if (leaves < 0) throw Error("a tree needs zero or more leaves, not " + str(leaves));
  check_schedule_entries(schedule);
  MergeTree t;
  t.leaves = leaves;
  std::vector<int64_t> current(leaves);
  for (int64_t i = 0; i < leaves; ++i) current[i] = i;
  for (size_t l = 0; l < schedule.size(); ++l) {
    check_room(l, schedule[l], current.size());
    for (size_t i = current.size(); i > 1; --i)  // Fisher-Yates
      std::swap(current[i - 1], current[below(i, rng)]);
    const size_t paired = 2 * static_cast<size_t>(schedule[l]);
    std::vector<int64_t> next(current.begin() + paired, current.end());
    for (size_t i = 0; i < paired; i += 2) {
      t.merges.push_back(unordered({current[i], current[i + 1]}));
      t.layer.push_back(static_cast<int64_t>(l) + 1);
      next.push_back(t.leaves + static_cast<int64_t>(t.merges.size()) - 1);
    }
    std::sort(next.begin(), next.end());  // the shuffle's input depends on ids alone
    current = std::move(next);
  }
  return t;
}

}  // namespace htm
