// Merge-tree scores on hand-made trees whose answers are worked out by hand: tree checks, sibling
// and cluster precision/recall/F1, schedule feasibility, and the agglomerative and random
// baselines (the latter against its exact expectation).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hierarchy/merge_tree.h"
#include "htm/error.h"
#include "test_util.h"

namespace htm {
namespace {

using Merges = std::vector<std::array<int64_t, 2>>;

// ((0,1),(2,3)),((4,5),(6,7)): nodes 8..11 are the leaf pairs, 12 and 13 the halves, 14 the root.
MergeTree balanced8() { return tree_from_merges(8, {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}}); }

// (((((0,1),2),3),4),5): one leaf pair, then one leaf joins per node.
MergeTree caterpillar6() { return tree_from_merges(6, {{0, 1}, {6, 2}, {7, 3}, {8, 4}, {9, 5}}); }

MergeTree predicted(int64_t leaves, const Merges& merges, const std::vector<int64_t>& layer) {
  return MergeTree{leaves, merges, layer};
}

void expect_scores(const Scores& s, double p, double r, double f1) {
  EXPECT_NEAR(s.precision, p, 1e-12);
  EXPECT_NEAR(s.recall, r, 1e-12);
  EXPECT_NEAR(s.f1, f1, 1e-12);
}

std::string error_of(int64_t leaves, const Merges& merges) {
  try {
    tree_from_merges(leaves, merges);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MergeTree, LayersAreHeights) {
  EXPECT_EQ(balanced8().layer, (std::vector<int64_t>{1, 1, 1, 1, 2, 2, 3}));
  EXPECT_EQ(caterpillar6().layer, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  // (0,1) and ((2,3),4) meet at the root: heights 1, 1, 2, then 1 + max(1, 2).
  EXPECT_EQ(tree_from_merges(5, {{0, 1}, {2, 3}, {6, 4}, {5, 7}}).layer, (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_TRUE(tree_from_merges(3, {}).merges.empty());  // a forest of leaves is a tree too
}

TEST(MergeTree, RejectsMalformedMerges) {
  EXPECT_NE(error_of(4, {{0, 1}, {1, 2}}).find("uses node 1, which an earlier merge used"), std::string::npos);
  EXPECT_NE(error_of(4, {{0, 5}, {1, 2}}).find("uses node 5, which does not exist before it"), std::string::npos);
  EXPECT_NE(error_of(4, {{2, 2}}).find("with itself"), std::string::npos);
  EXPECT_THROW(tree_from_merges(4, {{0, 1}, {4, 2}, {4, 3}}), Error);  // internal node twice
  EXPECT_THROW(tree_from_merges(4, {{-1, 0}}), Error);
  EXPECT_THROW(tree_from_merges(4, {{0, 4}}), Error);  // a node as its own child
  EXPECT_THROW(tree_from_merges(-1, {}), Error);
}

TEST(MergeTree, PerfectPredictionScoresOne) {
  const MergeTree truth = balanced8();
  expect_scores(sibling_scores(truth, truth), 1, 1, 1);
  expect_scores(cluster_scores(truth, truth), 1, 1, 1);
  // Child order and merge order within a layer do not matter.
  const MergeTree swapped =
      predicted(8, {{7, 6}, {5, 4}, {3, 2}, {1, 0}, {9, 8}, {11, 10}, {13, 12}}, {1, 1, 1, 1, 2, 2, 3});
  expect_scores(sibling_scores(swapped, truth), 1, 1, 1);
  expect_scores(cluster_scores(swapped, truth), 1, 1, 1);
}

TEST(MergeTree, WrongFirstLayerScoresExactFractions) {
  // Layer 1 pairs (0,2),(1,3),(4,5),(6,7); then the same halves and root as the truth.
  const MergeTree pred =
      predicted(8, {{0, 2}, {1, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}}, {1, 1, 1, 1, 2, 2, 3});
  // Siblings: 2 of 4 predicted pairs are true, 2 of 4 true pairs found.
  expect_scores(sibling_scores(pred, balanced8()), 0.5, 0.5, 0.5);
  // Clusters: {0,2} {1,3} are wrong; {4,5} {6,7} {0..3} {4..7} right, of 6 true sets.
  expect_scores(cluster_scores(pred, balanced8()), 4.0 / 6, 4.0 / 6, 4.0 / 6);
}

TEST(MergeTree, PartialForestScoresExactFractions) {
  // Layer 1: (0,1) (2,4) (6,7); layer 2: ((0,1),3) and ((6,7),5); no root.
  const MergeTree pred = predicted(8, {{0, 1}, {2, 4}, {6, 7}, {8, 3}, {10, 5}}, {1, 1, 1, 2, 2});
  // Siblings: 2 of 3 predicted true, 2 of 4 true found: F1 = 2·(2/3)(1/2)/(7/6) = 4/7.
  expect_scores(sibling_scores(pred, balanced8()), 2.0 / 3, 0.5, 4.0 / 7);
  // Clusters {0,1} {2,4} {6,7} {0,1,3} {5,6,7}: 2 of 5 true, 2 of 6 found: F1 = 4/11.
  expect_scores(cluster_scores(pred, balanced8()), 0.4, 1.0 / 3, 4.0 / 11);
}

TEST(MergeTree, OnlyLayerOneLeafPairsAreSiblingPredictions) {
  // (2,3) is a true pair but merged at layer 2, so it is no sibling prediction; it is a cluster.
  const MergeTree pred = predicted(8, {{0, 1}, {2, 3}}, {1, 2});
  expect_scores(sibling_scores(pred, balanced8()), 1, 0.25, 0.4);
  expect_scores(cluster_scores(pred, balanced8()), 1, 1.0 / 3, 0.5);
}

TEST(MergeTree, EmptySidesFollowTheDocumentedConventions) {
  const MergeTree none = predicted(8, {}, {});
  expect_scores(sibling_scores(none, balanced8()), 0, 0, 0);
  expect_scores(cluster_scores(none, balanced8()), 0, 0, 0);
  // Two leaves: the only set is the root, so neither side has a set left.
  const MergeTree pair = tree_from_merges(2, {{0, 1}});
  expect_scores(cluster_scores(pair, pair), 1, 1, 1);
  expect_scores(sibling_scores(pair, pair), 1, 1, 1);
  // A truth with no merges: nothing predicted can be right.
  const MergeTree bare = tree_from_merges(3, {});
  expect_scores(cluster_scores(predicted(3, {{0, 1}}, {1}), bare), 0, 0, 0);
  expect_scores(sibling_scores(predicted(3, {{0, 1}}, {1}), bare), 0, 0, 0);
  EXPECT_THROW(sibling_scores(predicted(7, {}, {}), balanced8()), Error);
  EXPECT_THROW(cluster_scores(predicted(8, {{0, 1}}, {}), balanced8()), Error);  // no layer
}

// A balanced tree over 2^depth leaves, its leaves in `order`: each level merges neighbours.
MergeTree balanced(int depth, const std::vector<int64_t>& order) {
  std::vector<int64_t> level = order;
  Merges merges;
  for (int64_t next = static_cast<int64_t>(order.size()); level.size() > 1;) {
    std::vector<int64_t> up;
    for (size_t i = 0; i < level.size(); i += 2) merges.push_back({level[i], level[i + 1]}), up.push_back(next++);
    level = up;
  }
  EXPECT_EQ(merges.size() + 1, size_t{1} << depth);
  return tree_from_merges(static_cast<int64_t>(order.size()), merges);
}

TEST(MergeTree, ClusterScoresAtEveryTreeSize) {
  // Leaves 0 and n − 1 swapped: the d − 1 sets below the root on each one's path are no longer
  // true, the other n − 2 − 2(d − 1) are. Up to 64 leaves the sets are bit masks (64: all bits
  // set at the root), above it sets of leaf lists: both score alike.
  for (int depth : {2, 4, 6, 7}) {
    const int64_t n = int64_t{1} << depth;
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    const MergeTree truth = balanced(depth, order);
    std::swap(order.front(), order.back());
    const double right = static_cast<double>(n - 2 - 2 * (depth - 1)) / static_cast<double>(n - 2);
    SCOPED_TRACE(n);
    expect_scores(cluster_scores(balanced(depth, order), truth), right, right, right);
    expect_scores(cluster_scores(truth, truth), 1, 1, 1);
    // The leaf pairs: the two that held leaf 0 or n − 1 are lost, n/2 − 2 of n/2 kept.
    const double pairs = static_cast<double>(n / 2 - 2) / static_cast<double>(n / 2);
    expect_scores(sibling_scores(balanced(depth, order), truth), pairs, pairs, pairs);
  }
}

TEST(MergeTree, CaterpillarTruth) {
  // True sets {0,1} {0,1,2} {0,1,2,3} {0..4} (root {0..5} left out); true pair (0,1).
  const MergeTree truth = caterpillar6();
  // Balanced guess: (0,1) (2,3) (4,5), ((0,1),(2,3)), root.
  const MergeTree guess = predicted(6, {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {9, 8}}, {1, 1, 1, 2, 3});
  expect_scores(sibling_scores(guess, truth), 1.0 / 3, 1, 0.5);
  // Sets {0,1} {2,3} {4,5} {0..3}: 2 of 4 true, 2 of 4 found.
  expect_scores(cluster_scores(guess, truth), 0.5, 0.5, 0.5);
  // A forest (0,1) (2,3): 1 of 2 sets true, 1 of 4 found: F1 = 2·(1/8)/(3/4) = 1/3.
  expect_scores(cluster_scores(predicted(6, {{0, 1}, {2, 3}}, {1, 1}), truth), 0.5, 0.25, 1.0 / 3);
}

TEST(ScheduleReaches, BalancedTree) {
  const MergeTree t = balanced8();
  EXPECT_TRUE(schedule_reaches(t, {4, 2, 1}));
  EXPECT_TRUE(schedule_reaches(t, {4}));  // the truth need not be finished
  EXPECT_TRUE(schedule_reaches(t, {}));
  EXPECT_TRUE(schedule_reaches(t, {0, 4, 0, 2, 1}));
  EXPECT_TRUE(schedule_reaches(t, {2, 2, 2, 1}));  // (0,1)(2,3); (4,5)(6,7); halves; root
  EXPECT_TRUE(schedule_reaches(t, {1, 1, 1, 1, 1, 1, 1}));
  // After 3 pairs at most one half is ready beside the 4th pair: 2 < 3.
  EXPECT_FALSE(schedule_reaches(t, {3, 3, 1}));
  EXPECT_FALSE(schedule_reaches(t, {4, 3}));        // only the two halves are ready
  EXPECT_FALSE(schedule_reaches(t, {1, 4}));        // one pair readies no half: 3 ready
  EXPECT_FALSE(schedule_reaches(t, {4, 2, 1, 1}));  // 8 merges, the tree has 7
  EXPECT_FALSE(schedule_reaches(t, {5}));
  EXPECT_THROW(schedule_reaches(t, {4, -1}), Error);
}

TEST(ScheduleReaches, Caterpillar) {
  const MergeTree t = caterpillar6();
  EXPECT_TRUE(schedule_reaches(t, {1, 1, 1, 1, 1}));
  EXPECT_TRUE(schedule_reaches(t, {1, 1, 1}));
  EXPECT_TRUE(schedule_reaches(t, {1, 0, 1}));
  EXPECT_FALSE(schedule_reaches(t, {2}));  // one leaf pair only
  EXPECT_FALSE(schedule_reaches(t, {1, 2}));
  EXPECT_FALSE(schedule_reaches(t, {1, 1, 1, 1, 1, 1}));
}

TEST(ScheduleReaches, FindsSchedulesThatHighestLevelFirstMisses) {
  // ((0,1),(2,3)),((4,5),6), [1, 3]: all three leaf pairs have level 2, and taking (0,1) first
  // leaves (2,3) and (4,5) ready; taking (4,5) first also readies ((4,5),6): 3 ready.
  const MergeTree seven = tree_from_merges(7, {{0, 1}, {2, 3}, {4, 5}, {7, 8}, {9, 6}, {10, 11}});
  EXPECT_TRUE(schedule_reaches(seven, {1, 3}));
  EXPECT_FALSE(schedule_reaches(seven, {1, 4}));
  // (((0,1),2),(3,4)),((5,6),(7,8)) with [3, 3]: build (0,1) (5,6) (7,8), then ((0,1),2), (3,4)
  // and ((5,6),(7,8)). Building (3,4) in the first layer instead leaves only 2 ready.
  const MergeTree nine = tree_from_merges(9, {{0, 1}, {9, 2}, {3, 4}, {10, 11}, {5, 6}, {7, 8}, {13, 14}, {12, 15}});
  EXPECT_TRUE(schedule_reaches(nine, {3, 3}));
  EXPECT_FALSE(schedule_reaches(nine, {3, 4}));  // 1 pair left + at most 2 new ready
  EXPECT_FALSE(schedule_reaches(nine, {4, 4}));
  // Four layers, so the search runs over two of them. Leaf pairs 11..14 with levels 3, 4, 3, 5;
  // the greedy builds 14, 12, 11 and then finds only 13 and 15 ready. Building 14, 12, 13 readies
  // 11, 15 and 17; then 16 = (15, 12); then 18 = (16, 11).
  const MergeTree eleven =
      tree_from_merges(11, {{1, 7}, {6, 2}, {5, 9}, {10, 3}, {14, 4}, {15, 12}, {0, 13}, {16, 11}, {17, 18}, {8, 19}});
  EXPECT_TRUE(schedule_reaches(eleven, {3, 3, 1, 1}));
  EXPECT_FALSE(schedule_reaches(eleven, {3, 3, 2}));
}

TEST(Agglomerative, RecoversASpatiallyObviousTree) {
  // Pairs 0.1 apart, pairs of pairs 1 apart, the two groups 10 apart; leaf ids shuffled.
  const std::vector<std::array<double, 2>> points = {{0, 0},    {10, 0},  {11, 0},  {1, 0},
                                                     {11, 0.1}, {0, 0.1}, {1, 0.1}, {10, 0.1}};
  const MergeTree t = agglomerative_merges(points, {4, 2, 1});
  // Equal distances go in node order: (0,5) (1,7) (2,4) (3,6); then (8,11) before (9,10).
  EXPECT_EQ(t.merges, (Merges{{0, 5}, {1, 7}, {2, 4}, {3, 6}, {8, 11}, {9, 10}, {12, 13}}));
  EXPECT_EQ(t.layer, (std::vector<int64_t>{1, 1, 1, 1, 2, 2, 3}));
  const MergeTree truth = tree_from_merges(8, {{0, 5}, {3, 6}, {1, 7}, {2, 4}, {8, 9}, {10, 11}, {12, 13}});
  expect_scores(sibling_scores(t, truth), 1, 1, 1);
  expect_scores(cluster_scores(t, truth), 1, 1, 1);
  EXPECT_TRUE(schedule_reaches(truth, {4, 2, 1}));
  const MergeTree again = agglomerative_merges(points, {4, 2, 1});
  EXPECT_EQ(again.merges, t.merges);
  EXPECT_EQ(again.layer, t.layer);
}

TEST(Agglomerative, PairsGreedilyAndWeighsCentroidsByLeaves) {
  // On a line at 0, 1, 1.5, 10: (1,2) is closest; (0,1) and (0,2) reuse a taken cluster, so the
  // second pair is (0,3) although it is the farthest.
  EXPECT_EQ(agglomerative_merges({{0, 0}, {1, 0}, {1.5, 0}, {10, 0}}, {2}).merges, (Merges{{1, 2}, {0, 3}}));
  // 0, 0.5, 2, 6, 11: (0,1), then ((0,1),2) at 1.75. Its centroid is (0 + 0.5 + 2)/3 = 5/6, 31/6
  // from leaf 3, farther than 3 to 4 (5); the mean of the two centroids (1.125) would be nearer.
  const MergeTree t = agglomerative_merges({{0, 0}, {0.5, 0}, {2, 0}, {6, 0}, {11, 0}}, {1, 1, 1});
  EXPECT_EQ(t.merges, (Merges{{0, 1}, {2, 5}, {3, 4}}));
  EXPECT_EQ(t.layer, (std::vector<int64_t>{1, 2, 3}));
}

TEST(Agglomerative, RejectsSchedulesTooLongForTheLeaves) {
  const std::vector<std::array<double, 2>> three = {{0, 0}, {1, 0}, {3, 0}};
  EXPECT_EQ(agglomerative_merges(three, {1, 1}).merges.size(), 2u);
  EXPECT_THROW(agglomerative_merges(three, {2}), Error);
  EXPECT_THROW(agglomerative_merges(three, {1, 1, 1}), Error);
  EXPECT_THROW(agglomerative_merges(three, {-1}), Error);
}

// The similarity rules on raw tokens of any width (issue 63's gate G4): `closest` is agglomerative
// clustering itself, `farthest` takes the most distant pair first, the cosine rules rank by angle,
// and ToMe pairs only tokens of the two alternating halves.
TEST(PairRules, EachRuleTakesItsBestPairFirst) {
  const std::vector<std::array<double, 2>> points = {{0, 0}, {10, 0}, {11, 0}, {1, 0}, {11, 0.1}, {0, 0.1}};
  std::vector<std::vector<double>> rows;
  for (const auto& p : points) rows.push_back({p[0], p[1]});
  EXPECT_EQ(rule_merges(rows, {3, 1}, PairRule::closest).merges, agglomerative_merges(points, {3, 1}).merges);
  // On a line at 0, 1, 1.5, 10: farthest first takes (0, 3), then (1, 2).
  const std::vector<std::vector<double>> line = {{0}, {1}, {1.5}, {10}};
  EXPECT_EQ(rule_merges(line, {2}, PairRule::farthest).merges, (Merges{{0, 3}, {1, 2}}));
  // Directions: 0 and 2 point alike (cos 0.999), so do 1 and 3 (0.995); 0 and 3 are opposite (-1),
  // 1 and 2 nearly (-0.989).
  const std::vector<std::vector<double>> dirs = {{1, 0}, {-1, 0.1}, {2, 0.1}, {-0.1, 0}};
  EXPECT_EQ(rule_merges(dirs, {2}, PairRule::cosine).merges, (Merges{{0, 2}, {1, 3}}));
  EXPECT_EQ(rule_merges(dirs, {2}, PairRule::anticosine).merges, (Merges{{0, 3}, {1, 2}}));
  // ToMe: A = {0, 2}, B = {1, 3}, so never (0, 2) or (1, 3): the best A-B pair (1, 2) at -0.989,
  // then (0, 3), the only one left.
  EXPECT_EQ(rule_merges(dirs, {2}, PairRule::tome).merges, (Merges{{1, 2}, {0, 3}}));
  EXPECT_EQ(rule_merges(dirs, {1, 1}, PairRule::cosine).merges.size(), 2u);  // layered on centroids
  EXPECT_THROW(rule_merges(line, {3}, PairRule::closest), Error);
  EXPECT_THROW(rule_merges({{0, 1}, {2}}, {1}, PairRule::closest), Error);  // rows of unequal width
  EXPECT_STREQ(pair_rule_name(PairRule::anticosine), "anticosine");
}

TEST(RandomMerges, ReproducibleValidForests) {
  for (const std::vector<int64_t>& schedule : {std::vector<int64_t>{8, 4, 2, 1}, std::vector<int64_t>{5, 0, 3, 2}}) {
    std::mt19937_64 a(42), b(42);
    const MergeTree t = random_merges(16, schedule, a);
    const MergeTree u = random_merges(16, schedule, b);
    EXPECT_EQ(t.merges, u.merges);
    EXPECT_EQ(t.layer, u.layer);
    // A valid forest (each node a child once, children first), with schedule[l] merges at
    // layer l + 1, each joining nodes made at earlier layers.
    EXPECT_NO_THROW(tree_from_merges(16, t.merges));
    std::vector<int64_t> per_layer(schedule.size(), 0);
    for (size_t k = 0; k < t.merges.size(); ++k) {
      ++per_layer[t.layer[k] - 1];
      for (int64_t c : t.merges[k]) {
        if (c >= 16) {
          EXPECT_LT(t.layer[c - 16], t.layer[k]);
        }
      }
    }
    EXPECT_EQ(per_layer, schedule);
  }
  std::mt19937_64 c(43), d(42);
  EXPECT_NE(random_merges(16, {8}, c).merges, random_merges(16, {8}, d).merges);
  std::mt19937_64 e(1);
  EXPECT_THROW(random_merges(4, {2, 1, 1}, e), Error);  // 4, 2, 1 clusters: no third pair
  EXPECT_THROW(random_merges(4, {3}, e), Error);
}

TEST(RandomMerges, FirstLayerMatchesItsExactDistribution) {
  // 8 leaves fully paired at random: a given true pair is matched with probability 1/7, so
  // E[sibling precision] = 1/7; all four true with probability 1/105 (perfect matchings of 8).
  // The number X of true pairs has Var X = 144/245, so precision (X/4) has sd √(9/245).
  const MergeTree truth = balanced8();
  std::mt19937_64 rng(2024);
  const int draws = 20000;
  double sum = 0;
  int perfect = 0;
  for (int i = 0; i < draws; ++i) {
    const double p = sibling_scores(random_merges(8, {4}, rng), truth).precision;
    sum += p;
    perfect += p == 1.0;
  }
  EXPECT_NEAR(sum / draws, 1.0 / 7, 4 * std::sqrt(9.0 / 245 / draws));
  const double q = 1.0 / 105;
  EXPECT_NEAR(static_cast<double>(perfect) / draws, q, 4 * std::sqrt(q * (1 - q) / draws));
}

}  // namespace
}  // namespace htm
