// The HTM model's architecture options (model.* settings): what assembly.cpp reads, once, to
// choose the model's parts. Nothing else in model/ branches on them.
#pragma once

#include <cstdint>

#include "htm/policy.h"

namespace htm {

/// Transformer blocks in the encoder and decoder (§4.4), or none.
enum class Mixing { transformer, none };
/// The merging and unmerging blocks: cross-attention of the new population over the old one,
/// then a residual MLP (§4.4), or the MLP alone.
enum class Refinement { cross_attention, mlp };
/// A.4: merged and unmerged outputs multiplied by their selection probability, or left as they are.
enum class MergedScale { none, probability };
/// Which tokens a decoder layer splits: the policy's choice, or those the encoder merged (mirror).
enum class UnmergeChoice { policy, mirror };
/// The slides' leaf/internal classifier on detached tokens, used in generation.
enum class LeafClassifier { none, trained };

/// The HTM model's architecture. How it is trained (the estimator's value heads and pair errors,
/// the anytime loss) lives in train/ and reaches a pass through ForwardHooks.
struct ModelOptions {
  int64_t dim = 256;
  int64_t heads = 8;
  int64_t mlp_ratio = 4;
  double dropout = 0.1;
  Mixing mixing = Mixing::transformer;
  Refinement refinement = Refinement::cross_attention;
  MergedScale merged_scale = MergedScale::none;
  UnmergeChoice unmerge = UnmergeChoice::policy;
  LeafClassifier leaf_classifier = LeafClassifier::none;
  int64_t classes = 0;          ///< > 0: encoder-only classifier with this many classes (§4.1)
  double timestep_scale = 1.0;  ///< multiplies the depth signal of eq. 7 (1: the paper)
  /// What the policy is asked for: the form of its log-probabilities (estimator.log_prob) and
  /// the bound on its pair logits (estimator.logit_bound, MergeContext::logit_bound), in
  /// training and evaluation alike.
  LogProbForm log_prob_form = LogProbForm::exact;
  double logit_bound = 0;
  /// The blocks keep only their inputs for backward, which runs them again (runtime.recompute):
  /// how the pass is differentiated, not what it computes.
  bool recompute_blocks = false;
  /// Whether a policy's entropy keeps its graph for backward (estimator.entropy > 0). Without an
  /// entropy bonus it is detached once reported: its B×T×T intermediates are let go at once.
  bool entropy_gradients = true;
};

}  // namespace htm
