// Merge trees and how well one matches another: the scores that tell whether a merge policy has
// learned the true hierarchy of Crosses and Trees data (HTM slides), plus the floor (uniform
// random merging) and the ceiling (layered agglomerative clustering) it is read against.
// Plain C++: no torch, so the metric code is tested on hand-made trees alone.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace htm {

/// A binary merge forest over `leaves` leaves. Leaves are nodes 0..leaves-1; merge k makes node
/// leaves+k from the two nodes merges[k], both made before it (or leaves). layer[k] is the
/// 1-based encoder layer that made merge k; for a true tree it is the node's height (a node of
/// two leaves has height 1). A full tree has leaves-1 merges; a model whose schedule stops
/// earlier leaves a forest.
struct MergeTree {
  int64_t leaves = 0;
  std::vector<std::array<int64_t, 2>> merges;
  std::vector<int64_t> layer;
};

/// Builds a true tree from its merges (children before parents), with each layer set to the
/// node's height (leaves 0, a node 1 + its taller child). Throws htm::Error unless every node is
/// a child at most once, children come first, and no merge joins a node with itself.
MergeTree tree_from_merges(int64_t leaves, const std::vector<std::array<int64_t, 2>>& merges);

/// Throws htm::Error, its message starting with `what`, unless every merge joins two distinct
/// nodes made before it, no node is merged twice, and there is one layer per merge.
void check_merge_tree(const MergeTree& tree, const std::string& what);

struct Scores {
  double precision = 0;
  double recall = 0;
  double f1 = 0;  ///< 2PR/(P+R); 0 when both are 0
};

/// Sibling pairs: the unordered leaf pairs of `predicted`'s layer-1 merges, scored against the
/// true sibling pairs (nodes of `truth` whose two children are both leaves).
/// Precision is 0 when nothing was predicted, recall 0 when the truth has no leaf pair.
/// Throws htm::Error when a tree is malformed or the two differ in leaves (as does cluster_scores).
Scores sibling_scores(const MergeTree& predicted, const MergeTree& truth);

/// Unlabelled cluster F1 as in unsupervised parsing: every internal node is the set of leaves
/// under it; sets of all leaves (the root) and single leaves are excluded; precision and recall
/// compare the two trees' sets. A tree with no set left scores 1 against a truth with none;
/// when only one side has sets, all three scores are 0.
Scores cluster_scores(const MergeTree& predicted, const MergeTree& truth);

/// Whether a model merging exactly schedule[l] pairs at layer l+1 can build only true nodes of
/// `truth`: every merge at a layer joins two nodes present before it. The truth need not be
/// finished. Highest level first (Hu's order; level = edges to the root) answers most cases, but
/// with exact counts per layer it can fail where another choice works (7 leaves
/// ((0,1),(2,3)),((4,5),6) with [1, 3]: build (4,5) first), so a failure goes to an exact search
/// over the shapes of the unbuilt part. That search gives up, answering false, past a fixed
/// amount of work (a few hundredths of a second): on balanced trees with make_schedule's
/// schedules, about 1 % of them from about 40 leaves on. Throws htm::Error on a malformed truth or
/// a negative schedule entry.
bool schedule_reaches(const MergeTree& truth, const std::vector<int64_t>& schedule);

/// The ceiling: layered agglomerative clustering. At each layer, the current clusters' centroids
/// (means of their leaves' positions) are paired greedily by increasing distance, skipping
/// clusters already paired at that layer, until schedule[l] pairs are made. Equal distances go
/// by the node ids (smaller first); each merge lists the smaller id first and is numbered in the
/// order it was accepted. Throws htm::Error when a layer asks for more pairs than clusters allow.
MergeTree agglomerative_merges(const std::vector<std::array<double, 2>>& positions,
                               const std::vector<int64_t>& schedule);

/// The pair rules a similarity policy follows, for tokens of any width: closest centroids
/// (agglomerative clustering), farthest, most cosine-similar, least cosine-similar, and ToMe's
/// bipartite rule (each layer's clusters in id order alternate between A and B; only A–B pairs,
/// most cosine-similar first, then any pair should those not fill the layer).
enum class PairRule { closest, farthest, cosine, anticosine, tome };
const char* pair_rule_name(PairRule rule);  ///< "nearest", "farthest", "cosine", "anticosine", "tome"

/// Layered merges by `rule` on the clusters' centroids (means of their leaves' rows of
/// `features`, one row a token), greedily, best pair first, as agglomerative_merges does for
/// points; equal scores go by the node ids. Throws htm::Error when a layer asks for more pairs than
/// clusters allow or the rows differ in width.
MergeTree rule_merges(const std::vector<std::vector<double>>& features, const std::vector<int64_t>& schedule,
                      PairRule rule);

/// The floor: schedule[l] disjoint pairs of current clusters, uniformly at random, per layer
/// (a Fisher–Yates shuffle of the clusters in id order, written out so that a seed gives the same
/// tree with any standard library; each merge lists the smaller id first). Throws htm::Error when
/// a layer asks for more pairs than clusters allow.
MergeTree random_merges(int64_t leaves, const std::vector<int64_t>& schedule, std::mt19937_64& rng);

}  // namespace htm
