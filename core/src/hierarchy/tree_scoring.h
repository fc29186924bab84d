// Scoring a model's merges against the true hierarchy of a batch (Batch::tree): the learned
// policy beside the uniform-random floor and the agglomerative-clustering ceiling.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hierarchy/merge_tree.h"
#include "htm/policy.h"
#include "store/metric.h"

namespace htm {

/// Each sample's merges over the first population's T tokens, replaying how the model renumbers
/// tokens after a layer (the src tokens drop out, the others keep their order). decisions: one
/// per encoder layer (an undefined src means r = 0). batch: the samples (0: read from the
/// decisions; give it when no layer may have merged, as with a schedule of zeros).
std::vector<MergeTree> merge_trees(const std::vector<MergeDecision>& decisions, int64_t tokens, int64_t batch = 0);
/// The true trees of a batch from Batch::tree (B×(N−1)×2).
std::vector<MergeTree> true_trees(const at::Tensor& tree);
/// A code equal for two trees exactly when they have the same shape (leaf labels aside):
/// "(" + the children's codes, sorted + ")", a leaf "()". Whether a schedule can build a tree
/// depends on its shape alone, so this keys a cache of schedule_reaches.
std::string shape_code(const MergeTree& tree);
/// Where a token sits, for clustering: a point (F = 2) itself, a flagged point (F = 3, the
/// `mirrored` dataset's x, y, s) its stored (x, y), a segment (F = 4) its midpoint.
std::vector<std::array<double, 2>> token_positions(const at::Tensor& sample);
/// A sample's N×F tokens as N rows of F doubles (any F), for the pair rules on raw tokens.
std::vector<std::vector<double>> token_features(const at::Tensor& sample);

/// Mean scores over samples, as metrics named `<prefix>sibling_precision`, `…sibling_recall`,
/// `…sibling_f1` and `…cluster_f1`.
class TreeScoreMean {
 public:
  void add(const MergeTree& predicted, const MergeTree& truth);
  int64_t samples() const { return n_; }
  std::vector<Metric> metrics(const std::string& prefix) const;

 private:
  double sibling_p_ = 0, sibling_r_ = 0, sibling_f1_ = 0, cluster_f1_ = 0;
  int64_t n_ = 0;
};

}  // namespace htm
