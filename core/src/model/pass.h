// What one forward pass of a model takes besides its input (ForwardHooks) and what it produces:
// the draws in the order drawn, every population, and the records asked for (ForwardResult).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "htm/merge.h"
#include "htm/policy.h"

namespace htm {

struct ForwardResult;

/// One decision a pass drew, in the order drawn: a merge layer's pairs or a decoder layer's
/// splits. The model records; the estimator (train/estimator/) assigns credit from these.
struct Draw {
  enum class Kind { merge, unmerge };
  Kind kind = Kind::merge;
  int64_t depth = 0;         ///< 1-based layer
  torch::Tensor population;  ///< B×T×C the tokens drawn from (in the graph)
  torch::Tensor src, dst;    ///< merge: B×r int64, src merged into dst
  torch::Tensor index;       ///< unmerge: B×r int64 tokens split
  torch::Tensor merged;      ///< merge: B×r×C the merged tokens, detached
  torch::Tensor log_prob;    ///< B×r, undefined when the policy learns nothing from the draw
  torch::Tensor entropy;     ///< merge: B, where the policy reports one
  /// merge, with ForwardHooks::pair_errors and log-probabilities: B×r, mean over channels of
  /// (unmerge(merged) − (dst, src))², how well each merged pair comes apart again; no gradient
  torch::Tensor pair_error;

  /// A merge layer's draw of `decision`'s pairs from `population`.
  static Draw merge(int64_t depth, const torch::Tensor& population, const MergeDecision& decision) {
    Draw d;
    d.depth = depth;
    d.population = population;
    d.src = decision.src;
    d.dst = decision.dst;
    d.log_prob = decision.log_prob;
    d.entropy = decision.entropy;
    return d;
  }
  /// A decoder layer's draw of `decision`'s splits from `population`.
  static Draw unmerge(int64_t depth, const torch::Tensor& population, const UnmergeDecision& decision) {
    Draw d;
    d.kind = Kind::unmerge;
    d.depth = depth;
    d.population = population;
    d.index = decision.index;
    d.log_prob = decision.log_prob;
    return d;
  }
};

/// The splits that undo one merge layer (model.unmerge = "mirror"): `forced`, the positions of
/// the merged (dst) tokens in the merged population, and `origin`, the index in the T tokens
/// before the merge of each token the unmerge produces (the first child takes dst's place, the
/// second is appended).
struct MirrorSplit {
  torch::Tensor forced, origin;
};

/// What one pass is given besides its input and schedule, and which extra records it keeps.
/// The pass calls back into training code at one place only, the losses' rewrite of the tokens
/// entering each layer; everything the estimator and the anytime loss read is in the result.
struct ForwardHooks {
  /// Batch::tree of the input, when the data has one: the host fills MergeContext::siblings from
  /// it for a policy that needs_truth().
  torch::Tensor tree;
  /// Replay (estimator.replay): one decision per encoder layer whose pairs (src, dst) are merged
  /// instead of a draw; the policy only scores them (its merge_logits()). Empty: the policy draws.
  std::vector<MergeDecision> merges;
  /// Rewrites the B×T×C tokens entering encoder layer `depth` (1-based); empty: unchanged.
  std::function<torch::Tensor(const torch::Tensor&, int64_t depth)> layer_entry;
  /// Measure each merge draw's pair errors (Draw::pair_error) as it merges: the dense reward's
  /// (estimator.dense). The merge operator unmerges inside its own plugin scope, so an operator
  /// that draws random numbers draws them in the pass's own order.
  bool pair_errors = false;
  /// Reconstruct from every intermediate population as well (ForwardResult::levels), once the
  /// main decode is done: the anytime loss (train.anytime). Their unmerge draws join the draws.
  bool levels = false;
};

/// Everything one forward pass produces.
struct ForwardResult {
  torch::Tensor output;  ///< B×sample_shape
  torch::Tensor root;    ///< B×T_D×C tokens at the bottleneck
  /// Every merge and (unforced) unmerge draw, in the order drawn (Draw).
  std::vector<Draw> draws;
  std::vector<torch::Tensor> encoder_tokens;  ///< [d] enters encoder layer d+1
  std::vector<torch::Tensor> populations;     ///< [d] leaves encoder layer d+1 (its merge block)
  std::vector<torch::Tensor> decoder_tokens;  ///< [d] leaves the decoder layer mirroring it
  std::vector<MergeDecision> merges;          ///< per encoder layer
  std::vector<MirrorSplit> mirrors;           ///< per encoder layer, with model.unmerge = "mirror"
  /// With ForwardHooks::levels: [d−1] the output reconstructed from the population after encoder
  /// layer d, d = 1…D−1 (HtmModelImpl::reconstruct_level); empty for a model without a decoder.
  std::vector<torch::Tensor> levels;
  /// Teacher-forced pass only: per layer, B×r log-probabilities of the true merged tokens
  /// under the unmerge policy (undefined when it learns nothing).
  std::vector<torch::Tensor> unmerge_log_probs;
  /// With the leaf/internal classifier: its per-sample cross-entropy (B) over the populations it
  /// is taught on, and (in eval mode) the fraction of those tokens it classifies right (a scalar
  /// on the device).
  torch::Tensor leaf_loss;
  torch::Tensor leaf_accuracy;
};

/// B: Σ of the draws' log-probabilities, of every draw or of those of one kind (undefined when
/// none has one).
torch::Tensor total_log_prob(const ForwardResult& out, std::optional<Draw::Kind> only = std::nullopt);
/// B: Σ of the merge draws' entropies (undefined when none reports one).
torch::Tensor total_entropy(const ForwardResult& out);

}  // namespace htm
