// The generated datasets with a known hierarchy (trees, crosses; HTM slides), through the plugin
// registry: shapes, a valid true merge tree per sample, determinism, and the spatial structure
// the truth claims (crosses share midpoints; tree siblings are nearer than cousins).
#include <cmath>
#include <map>

#include <torch/torch.h>

#include "hierarchy/merge_tree.h"
#include "hierarchy/tree_scoring.h"
#include "htm/dataset.h"
#include "htm/error.h"
#include "plugins_util.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

std::shared_ptr<Dataset> make(const std::string& name, const std::map<std::string, Value>& overrides = {}) {
  Params p = htm::testing::plugins().default_params(PluginKind::dataset, name);
  p.set("train_size", int64_t{64});
  p.set("test_size", int64_t{16});
  for (const auto& [k, v] : overrides) p.set(k, v);
  return htm::testing::plugins().create<Dataset>(PluginKind::dataset, name, p, BuildContext{});
}

Batch all(const Dataset& data, Split split) { return data.get(split, torch::arange(data.size(split), torch::kLong)); }

// One sample's truth (N−1 rows): every node 0..2N−3 is a child exactly once, children come
// before their parents, and the smaller child is first.
::testing::AssertionResult valid_tree(const torch::Tensor& tree, int64_t n) {
  if (tree.sizes() != torch::IntArrayRef({n - 1, 2}))
    return ::testing::AssertionFailure() << "tree shape " << tree.sizes();
  std::vector<int> used(2 * n - 1, 0);
  for (int64_t k = 0; k < n - 1; ++k) {
    const int64_t a = tree[k][0].item<int64_t>(), b = tree[k][1].item<int64_t>();
    if (a < 0 || b >= n + k || a >= b)
      return ::testing::AssertionFailure() << "row " << k << " = [" << a << ", " << b << "]";
    if (used[a]++ || used[b]++) return ::testing::AssertionFailure() << "row " << k << " reuses a node";
  }
  for (int64_t i = 0; i + 1 < 2 * n - 1; ++i)
    if (used[i] != 1) return ::testing::AssertionFailure() << "node " << i << " has no parent";
  return ::testing::AssertionSuccess();
}

// Heights of nodes 0..2N−2 (leaves 0), and the rows in non-decreasing height order.
std::vector<int64_t> heights(const torch::Tensor& tree, int64_t n) {
  std::vector<int64_t> h(2 * n - 1, 0);
  for (int64_t k = 0; k < n - 1; ++k) {
    h[n + k] = 1 + std::max(h[tree[k][0].item<int64_t>()], h[tree[k][1].item<int64_t>()]);
    EXPECT_TRUE(k == 0 || h[n + k] >= h[n + k - 1]) << "rows not sorted by height";
  }
  return h;
}

// Leaves under every node.
std::vector<std::vector<int64_t>> leaf_sets(const torch::Tensor& tree, int64_t n) {
  std::vector<std::vector<int64_t>> s(2 * n - 1);
  for (int64_t i = 0; i < n; ++i) s[i] = {i};
  for (int64_t k = 0; k < n - 1; ++k) {
    s[n + k] = s[tree[k][0].item<int64_t>()];
    const auto& right = s[tree[k][1].item<int64_t>()];
    s[n + k].insert(s[n + k].end(), right.begin(), right.end());
  }
  return s;
}

void expect_shapes_and_trees(const std::string& name, const std::map<std::string, Value>& params, int64_t n,
                             int64_t features) {
  SCOPED_TRACE(name);
  auto data = make(name, params);
  EXPECT_EQ(data->sample_shape(), (std::vector<int64_t>{n, features}));
  EXPECT_EQ(data->num_classes(), 0);
  EXPECT_EQ(data->size(Split::train), 64);
  EXPECT_EQ(data->size(Split::test), 16);
  for (Split split : {Split::train, Split::test}) {
    Batch b = all(*data, split);
    const int64_t size = data->size(split);
    ASSERT_EQ(b.input.sizes(), (std::vector<int64_t>{size, n, features}));
    EXPECT_EQ(b.input.scalar_type(), torch::kFloat);
    EXPECT_FALSE(b.labels.defined());
    ASSERT_TRUE(b.tree.defined());
    ASSERT_EQ(b.tree.sizes(), (std::vector<int64_t>{size, n - 1, 2}));
    EXPECT_EQ(b.tree.scalar_type(), torch::kLong);
    EXPECT_GE(b.input.min().item<double>(), -1.0);
    EXPECT_LE(b.input.max().item<double>(), 1.0);
    for (int64_t i = 0; i < size; ++i) {
      ASSERT_TRUE(valid_tree(b.tree[i], n)) << "sample " << i;
      heights(b.tree[i], n);
    }
  }
  // Any order, repeats allowed.
  Batch whole = all(*data, Split::train);
  Batch some = data->get(Split::train, torch::tensor({3, 0, 3}, torch::kLong));
  EXPECT_TRUE(torch::equal(some.input[0], whole.input[3]));
  EXPECT_TRUE(torch::equal(some.input[2], whole.input[3]));
  EXPECT_TRUE(torch::equal(some.tree[1], whole.tree[0]));
}

void expect_seeded(const std::string& name) {
  SCOPED_TRACE(name);
  Batch a = all(*make(name), Split::train), b = all(*make(name), Split::train);
  EXPECT_TRUE(torch::equal(a.input, b.input) && torch::equal(a.tree, b.tree));
  Batch other = all(*make(name, {{"seed", int64_t{1}}}), Split::train);
  EXPECT_FALSE(torch::equal(a.input, other.input));
  Batch test = all(*make(name), Split::test);
  EXPECT_FALSE(torch::equal(a.input.narrow(0, 0, 16), test.input));
  // Sample i does not depend on how many others are generated.
  Batch fewer = all(*make(name, {{"train_size", int64_t{8}}}), Split::train);
  EXPECT_TRUE(torch::equal(a.input.narrow(0, 0, 8), fewer.input));
  // The run's seed changes nothing by default; with per_run it is mixed with seed, not added.
  const auto with = [&](bool per_run, int64_t run_seed, int64_t seed) {
    return all(*make(name, {{kPerRunParam, per_run}, {kRunSeedParam, run_seed}, {"seed", seed}}), Split::train).input;
  };
  EXPECT_TRUE(torch::equal(a.input, with(false, 5, 0)));
  EXPECT_TRUE(torch::equal(with(true, 5, 0), with(true, 5, 0)));
  EXPECT_FALSE(torch::equal(a.input, with(true, 5, 0)));
  EXPECT_FALSE(torch::equal(with(true, 5, 0), with(true, 6, 0)));
  EXPECT_FALSE(torch::equal(with(true, 5, 0), with(true, 0, 5)));
}

void expect_error(const std::string& name, const std::map<std::string, Value>& params, const std::string& parameter) {
  try {
    make(name, params);
    ADD_FAILURE() << name << " accepted a bad " << parameter;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(name + ":"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr(parameter));
  }
}

// ---------------------------------------------------------------------------------------------
TEST(HierarchyData, TreesShapesAndTrees) {
  expect_shapes_and_trees("trees", {}, 16, 2);
  expect_shapes_and_trees("trees", {{"tokens", int64_t{6}}}, 6, 2);
  expect_shapes_and_trees("trees", {{"tokens", int64_t{2}}}, 2, 2);
}

TEST(HierarchyData, CrossesShapesAndTrees) {
  expect_shapes_and_trees("crosses", {}, 8, 4);
  expect_shapes_and_trees("crosses", {{"crosses", int64_t{3}}}, 6, 4);
  expect_shapes_and_trees("crosses", {{"crosses", int64_t{1}}}, 2, 4);
}

TEST(HierarchyData, MirroredShapesAndTrees) {
  expect_shapes_and_trees("mirrored", {}, 16, 3);
  expect_shapes_and_trees("mirrored", {{"tokens", int64_t{6}}}, 6, 3);
  expect_shapes_and_trees("mirrored", {{"tokens", int64_t{2}}}, 2, 3);
}

TEST(HierarchyData, SameSeedSameDataOtherSeedOrSplitOrPerRunSeedOtherData) {
  expect_seeded("trees");
  expect_seeded("crosses");
  expect_seeded("mirrored");
}

// Undoing the reflection (s·(x, y)) gives the trees sample of the same seed, tree and all; in
// every pair of sibling leaves exactly one is reflected, and no other leaf is.
TEST(HierarchyData, MirroredIsTheTreesSampleWithOneOfEachLeafPairReflected) {
  for (int64_t n : {16, 6, 2}) {
    SCOPED_TRACE(n);
    Batch m = all(*make("mirrored", {{"tokens", n}}), Split::train);
    Batch t = all(*make("trees", {{"tokens", n}}), Split::train);
    auto s = m.input.select(2, 2);
    EXPECT_TRUE(torch::equal(s.abs(), torch::ones_like(s)));
    EXPECT_TRUE(torch::equal(m.input.narrow(2, 0, 2) * s.unsqueeze(2), t.input));
    EXPECT_TRUE(torch::equal(m.tree, t.tree));
    for (int64_t i = 0; i < m.input.size(0); ++i) {
      int64_t in_leaf_pairs = 0;
      for (int64_t k = 0; k + 1 < n; ++k) {
        const int64_t a = m.tree[i][k][0].item<int64_t>(), b = m.tree[i][k][1].item<int64_t>();
        if (a >= n || b >= n) continue;
        in_leaf_pairs += 2;
        EXPECT_EQ(s[i][a].item<float>() * s[i][b].item<float>(), -1.0f) << "sample " << i << " pair " << k;
      }
      EXPECT_EQ((s[i] < 0).sum().item<int64_t>() * 2, in_leaf_pairs) << "sample " << i;
    }
  }
}

// exact: each reflected leaf is its sibling's mirror image, the pair's tokens summing to (0, 0, 0).
TEST(HierarchyData, ExactMirroredPairsSumToZero) {
  Batch m = all(*make("mirrored", {{"exact", true}}), Split::train);
  Batch loose = all(*make("mirrored"), Split::train);
  EXPECT_TRUE(torch::equal(m.tree, loose.tree));
  EXPECT_TRUE(torch::equal(m.input.select(2, 2), loose.input.select(2, 2)));  // the same leaves reflected
  for (int64_t i = 0; i < m.input.size(0); ++i)
    for (int64_t k = 0; k < 15; ++k) {
      const int64_t a = m.tree[i][k][0].item<int64_t>(), b = m.tree[i][k][1].item<int64_t>();
      if (a >= 16 || b >= 16) continue;
      EXPECT_TRUE(torch::equal(m.input[i][a], -m.input[i][b])) << "sample " << i << " pair " << k;
    }
}

// The point of the dataset: agglomerative clustering on the stored positions (what similarity
// sees) finds few true siblings, while on the positions with the reflection undone it scores as
// on trees. The tree is in the data; proximity does not point to it.
TEST(HierarchyData, AgglomerativeClusteringFailsOnMirroredButNotOnceTheReflectionIsUndone) {
  Batch m = all(*make("mirrored", {{"test_size", int64_t{256}}}), Split::test);
  const auto truth = true_trees(m.tree);
  const std::vector<int64_t> schedule = {8, 4, 2, 1};
  TreeScoreMean stored, undone;
  for (size_t b = 0; b < truth.size(); ++b) {
    auto x = m.input[static_cast<int64_t>(b)];
    stored.add(agglomerative_merges(token_positions(x), schedule), truth[b]);
    auto unreflected = x.narrow(1, 0, 2) * x.select(1, 2).unsqueeze(1);
    undone.add(agglomerative_merges(token_positions(unreflected), schedule), truth[b]);
  }
  auto value = [](const TreeScoreMean& s, const std::string& name) {
    for (const auto& m : s.metrics(""))
      if (m.name == name) return m.value;
    return -1.0;
  };
  EXPECT_LE(value(stored, "sibling_f1"), 0.2);
  EXPECT_LE(value(stored, "cluster_f1"), 0.5);
  EXPECT_GE(value(undone, "sibling_f1"), 0.9);
  EXPECT_GE(value(undone, "cluster_f1"), 0.9);
  std::printf("agglomerative on mirrored: sibling F1 %.3f, cluster F1 %.3f; reflection undone: %.3f, %.3f\n",
              value(stored, "sibling_f1"), value(stored, "cluster_f1"), value(undone, "sibling_f1"),
              value(undone, "cluster_f1"));
}

// Siblings (height-1 nodes) lie nearer each other than leaves of different height-2 subtrees.
TEST(HierarchyData, TreeSiblingsAreNearerThanCousins) {
  for (int64_t n : {16, 6}) {
    SCOPED_TRACE(n);
    Batch b = all(*make("trees", {{"tokens", n}}), Split::train);
    double sibling = 0, apart = 0;
    int64_t siblings = 0, pairs = 0;
    for (int64_t i = 0; i < b.input.size(0); ++i) {
      const auto tree = b.tree[i];
      const auto x = b.input[i];
      const auto h = heights(tree, n);
      const auto sets = leaf_sets(tree, n);
      auto dist = [&](int64_t u, int64_t v) { return (x[u] - x[v]).norm().item<double>(); };
      std::vector<int64_t> group(n, -1);
      for (int64_t k = 0; k < n - 1; ++k) {
        if (h[n + k] == 1) sibling += dist(tree[k][0].item<int64_t>(), tree[k][1].item<int64_t>());
        siblings += h[n + k] == 1;
        if (h[n + k] == 2)
          for (int64_t leaf : sets[n + k]) group[leaf] = k;
      }
      for (int64_t u = 0; u < n; ++u)
        for (int64_t v = u + 1; v < n; ++v)
          if (group[u] >= 0 && group[v] >= 0 && group[u] != group[v]) {
            apart += dist(u, v);
            ++pairs;
          }
    }
    ASSERT_GT(siblings, 0);
    ASSERT_GT(pairs, 0);
    EXPECT_LT(sibling / siblings, apart / pairs);
  }
}

// Each height-1 node of the truth is a cross: two segments with one midpoint; no other two
// segments share a midpoint. Endpoints are in canonical order.
TEST(HierarchyData, CrossesPairSegmentsSharingTheirMidpoint) {
  for (int64_t k : {4, 3}) {
    SCOPED_TRACE(k);
    const int64_t n = 2 * k;
    Batch b = all(*make("crosses", {{"crosses", k}}), Split::train);
    for (int64_t i = 0; i < b.input.size(0); ++i) {
      const auto seg = b.input[i].to(torch::kDouble);
      const auto tree = b.tree[i];
      const auto h = heights(tree, n);
      const auto mid = (seg.narrow(1, 0, 2) + seg.narrow(1, 2, 2)) / 2;  // n×2
      for (int64_t s = 0; s < n; ++s) {
        const double x1 = seg[s][0].item<double>(), y1 = seg[s][1].item<double>();
        const double x2 = seg[s][2].item<double>(), y2 = seg[s][3].item<double>();
        EXPECT_TRUE(x1 < x2 || (x1 == x2 && y1 <= y2)) << "sample " << i << " segment " << s;
      }
      std::vector<std::vector<bool>> paired(n, std::vector<bool>(n, false));
      int64_t crosses = 0;
      for (int64_t r = 0; r < n - 1; ++r) {
        if (h[n + r] != 1) continue;
        ++crosses;
        const int64_t a = tree[r][0].item<int64_t>(), c = tree[r][1].item<int64_t>();
        ASSERT_LT(c, n);
        paired[a][c] = paired[c][a] = true;
        EXPECT_LT((mid[a] - mid[c]).abs().max().item<double>(), 1e-5) << "sample " << i;
      }
      EXPECT_EQ(crosses, k) << "sample " << i;
      for (int64_t u = 0; u < n; ++u)
        for (int64_t v = u + 1; v < n; ++v)
          if (!paired[u][v]) {
            EXPECT_GT((mid[u] - mid[v]).abs().max().item<double>(), 1e-3)
                << "sample " << i << ": segments " << u << " and " << v << " share a midpoint";
          }
    }
  }
}

TEST(HierarchyData, BadParametersAreNamed) {
  expect_error("trees", {{"tokens", int64_t{1}}}, "tokens");
  expect_error("trees", {{"shrink", 1.5}}, "shrink");
  expect_error("trees", {{"train_size", int64_t{0}}}, "train_size");
  expect_error("crosses", {{"crosses", int64_t{0}}}, "crosses");
  expect_error("crosses", {{"shrink", 1.5}}, "shrink");
  expect_error("crosses", {{"min_angle", 0.0}}, "min_angle");
  expect_error("mirrored", {{"tokens", int64_t{1}}}, "tokens");
  expect_error("mirrored", {{"angle_jitter", 91.0}}, "angle_jitter");
}

}  // namespace
}  // namespace htm
