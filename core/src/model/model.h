// The hierarchical token-merging autoencoder (paper §3.1). Shapes: B batch, T tokens, C width,
// h heads, r pairs merged at a layer, D depth actually run (≤ L, the schedule's length).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "htm/adapter.h"
#include "htm/layers.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "model/schedule.h"

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
};

/// Pre-norm transformer encoder block (MHA + GELU MLP).
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(const ModelOptions& o);
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* attention = nullptr);

 private:
  torch::nn::LayerNorm norm_{nullptr};
  Attention attn_{nullptr};
  double dropout_;
  ResidualMlp mlp_{nullptr};
};
TORCH_MODULE(TransformerBlock);

/// Cross-attention of the new population over the old one, then a residual MLP.
class RefineBlockImpl : public torch::nn::Module {
 public:
  RefineBlockImpl(const ModelOptions& o);
  /// Keys of the old population as the cross-attention sees them (B×T×C), for shared-key policies.
  std::pair<torch::Tensor, torch::Tensor> key_values(const torch::Tensor& old_tokens);
  torch::Tensor forward(const torch::Tensor& new_tokens, const torch::Tensor& keys, const torch::Tensor& values);

 private:
  bool cross_attention_;
  double dropout_;
  torch::nn::LayerNorm norm_q_{nullptr}, norm_kv_{nullptr};
  Attention attn_{nullptr};
  ResidualMlp mlp_{nullptr};
};
TORCH_MODULE(RefineBlock);

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
};

/// The splits that undo one merge layer (model.unmerge = "mirror"): `forced`, the positions of
/// the merged (dst) tokens in the merged population, and `origin`, the index in the T tokens
/// before the merge of each token the unmerge produces (the first child takes dst's place, the
/// second is appended).
struct MirrorSplit {
  torch::Tensor forced, origin;
};

/// Callbacks into one forward pass.
struct ForwardHooks {
  /// Rewrites the B×T×C tokens entering encoder layer `depth` (1-based); empty: unchanged.
  std::function<torch::Tensor(const torch::Tensor&, int64_t depth)> layer_entry;
  /// Batch::tree of the input, when the data has one: the host fills MergeContext::siblings from
  /// it for a policy that needs_truth().
  torch::Tensor tree;
  /// Replay (estimator.replay): one decision per encoder layer whose pairs (src, dst) are merged
  /// instead of a draw; the policy only scores them (its merge_logits()). Empty: the policy draws.
  std::vector<MergeDecision> merges;
  /// Called right after each merge layer merged (the draw is the last of ForwardResult::draws),
  /// within the merge operator's plugin scope: the dense reward measures its pair errors here
  /// (Estimator::watch in train/estimator/estimator.h), so an operator that draws random
  /// numbers draws them in the pass's own order.
  std::function<void(MergeOperator& op, const Draw& draw)> merged;
  /// Called once the main decode is done, before the output is unlifted: the anytime loss
  /// (train/objective.h) reconstructs from the intermediate populations here
  /// (HtmModelImpl::reconstruct_level), its unmerge draws joining ForwardResult::draws.
  std::function<void(ForwardResult& result)> decoded;
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
  /// Teacher-forced pass only: per layer, B×r log-probabilities of the true merged tokens
  /// under the unmerge policy (undefined when it learns nothing).
  std::vector<torch::Tensor> unmerge_log_probs;
  /// With the leaf/internal classifier: its per-sample cross-entropy (B) over the populations it
  /// is taught on, and (in eval mode) the fraction of those tokens it classifies right.
  torch::Tensor leaf_loss;
  double leaf_accuracy = 0;
};

/// B: Σ of the draws' log-probabilities, of every draw or of those of one kind (undefined when
/// none has one).
torch::Tensor total_log_prob(const ForwardResult& out, std::optional<Draw::Kind> only = std::nullopt);
/// B: Σ of the merge draws' entropies (undefined when none reports one).
torch::Tensor total_entropy(const ForwardResult& out);

/// What the trainer drives: the HTM model, or a baseline such as the ViT (vit.h).
class Model : public torch::nn::Module {
 public:
  /// One pass with the merging `schedule` (one r per layer run; baselines may ignore it).
  virtual ForwardResult forward(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                at::Generator generator, const ForwardHooks* hooks = nullptr) = 0;
  /// The teacher-forced pre-training pass (§3.2.2), where the model has one.
  virtual ForwardResult forward_teacher_forced(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                               at::Generator generator, const ForwardHooks* hooks);
  /// The policy's first-layer merge logits (B×T×T), undefined where there is no policy or it
  /// cannot say. Call in eval mode.
  virtual torch::Tensor first_merge_logits(const torch::Tensor& input, int64_t r);
  /// Per-sample reconstruction error (B) of an output against its input; default MSE.
  virtual torch::Tensor reconstruction_error(const torch::Tensor& output, const torch::Tensor& input);
};

class HtmModelImpl : public Model {
 public:
  HtmModelImpl(const ModelOptions& options, std::shared_ptr<Adapter> adapter, std::shared_ptr<Policy> policy,
               std::shared_ptr<MergeOperator> merge);

  /// Encodes with `schedule` and decodes with the same schedule; a classifier (options.classes
  /// > 0) stops at the root and returns B×classes logits as `output`.
  ForwardResult forward(const torch::Tensor& input, const std::vector<int64_t>& schedule, at::Generator generator,
                        const ForwardHooks* hooks = nullptr) override;
  /// Teacher forcing (§3.2.2): the encoder runs as usual, and after each layer d the mirroring
  /// decoder layer unmerges exactly the r tokens just merged (the policy scores them, forced).
  /// decoder_tokens[d] is that one-layer reconstruction put back in encoder_tokens[d]'s order;
  /// output is the input reconstructed from decoder_tokens[0]; log_prob is left undefined (the
  /// per-layer log-probabilities are in merges[d].log_prob and unmerge_log_probs).
  ForwardResult forward_teacher_forced(const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                       at::Generator generator, const ForwardHooks* hooks) override;
  torch::Tensor first_merge_logits(const torch::Tensor& input, int64_t r) override;
  torch::Tensor reconstruction_error(const torch::Tensor& output, const torch::Tensor& input) override;

  /// Generation (paper A.1, slides): decodes B×T_D×C bottleneck tokens. With `by_classifier`
  /// each sample is decoded alone: at every depth the tokens the leaf/internal classifier calls
  /// internal (those whose probability of being a leaf is at most `leaf_threshold`) are
  /// unmerged, until it calls all of them leaves or depth 1 is done. Otherwise the full
  /// `schedule` is used, as for images, whose depth is fixed. One output per sample
  /// (sample_shape, or M×F for a set of M elements).
  std::vector<torch::Tensor> generate(const torch::Tensor& roots, const std::vector<int64_t>& schedule,
                                      at::Generator generator, bool by_classifier, double leaf_threshold = 0.5);
  bool has_leaf_classifier() const { return options_.leaf_classifier == LeafClassifier::trained; }
  /// The input reconstructed from the population after encoder layer `level` (result.populations,
  /// 1 ≤ level < the pass's depth) by decoder layers level…1, with the pass's schedule and, when
  /// unmerging mirrors, its splits; the unmerge draws join result.draws. The anytime loss's
  /// reconstructions (train/objective.h), asked for from ForwardHooks::decoded.
  torch::Tensor reconstruct_level(ForwardResult& result, int64_t level, const std::vector<int64_t>& schedule,
                                  at::Generator generator);

  int64_t num_tokens() const { return adapter_->num_tokens(); }
  Adapter& adapter() { return *adapter_; }
  /// The policy deciding now: the trained one, or the one switch_policy() put in its place.
  Policy& policy() { return switched_ ? *switched_ : *policy_; }
  /// Decides with `policy` instead of the trained one until called with nullptr (evaluating the
  /// same weights under another policy); the trained policy's parameters stay where they are.
  void switch_policy(std::shared_ptr<Policy> policy) { switched_ = std::move(policy); }

 private:
  /// Where each token of the current population sits in the data's true tree, for policies
  /// that read it: node (B×T, −1 when the token is no node of the truth), parent (B×(2N−1), −1
  /// at the root).
  struct Truth {
    torch::Tensor node, parent;
  };
  /// The truth's tracker for this pass, or nothing when the policy does not read it.
  std::optional<Truth> truth_for(const torch::Tensor& input, const ForwardHooks* hooks);
  /// Tokens entering encoder layer d: depth signal, then the hooks.
  torch::Tensor enter(const torch::Tensor& x, int64_t d, const ForwardHooks* hooks);
  /// Returns the merged population; `keep` (if given) receives, for each of its tokens, the
  /// index in x it came from (B×(T−r)).
  torch::Tensor merge_layer(const torch::Tensor& x, int64_t r, int64_t depth, const torch::Tensor& attention,
                            at::Generator generator, ForwardResult& result, torch::Tensor* keep = nullptr,
                            Truth* truth = nullptr, const MergeDecision* replayed = nullptr,
                            const ForwardHooks* hooks = nullptr);
  /// `forced` (B×r): teacher forcing, unmerge these tokens. `chosen` (if given) receives the
  /// B×r indices unmerged.
  torch::Tensor unmerge_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                              ForwardResult& result, const torch::Tensor& forced = {}, torch::Tensor* chosen = nullptr);
  /// One decoder layer at `depth`: the timestep signal, the unmerging block, the transformer
  /// block. `forced` and `chosen` as for unmerge_layer.
  torch::Tensor decoder_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                              ForwardResult& result, const torch::Tensor& forced = {}, torch::Tensor* chosen = nullptr);
  /// B×T×2 leaf/internal logits of detached tokens.
  torch::Tensor leaf_logits(const torch::Tensor& tokens);
  torch::Tensor timestep(int64_t depth) const;
  /// Decoder layers from…1 on `y` (mirroring result.mirrors with model.unmerge = "mirror");
  /// `record`: the main pass, whose populations fill decoder_tokens and, when `lessons` is
  /// given, teach the leaf classifier.
  torch::Tensor decode(ForwardResult& result, torch::Tensor y, int64_t from, const std::vector<int64_t>& schedule,
                       at::Generator generator, bool record,
                       std::vector<std::pair<torch::Tensor, torch::Tensor>>* lessons);

  ModelOptions options_;
  /// The adapter's lift and unlift, marked as the adapter's calls (plugin_scope.h).
  torch::Tensor lift(const torch::Tensor& input);
  torch::Tensor unlift(const torch::Tensor& tokens);
  std::shared_ptr<Adapter> adapter_;
  std::shared_ptr<Policy> policy_;
  std::shared_ptr<Policy> switched_;  ///< deciding instead of policy_ when set
  /// The policy whose merge [0] and unmerge [1] decisions had their index values checked once
  /// (shapes are checked at every call; values cost two reductions, so once per policy).
  const Policy* values_checked_[2] = {nullptr, nullptr};
  std::shared_ptr<MergeOperator> merge_;
  TransformerBlock encoder_block_{nullptr}, decoder_block_{nullptr};
  RefineBlock merge_refine_{nullptr}, unmerge_refine_{nullptr};
  torch::nn::LayerNorm head_norm_{nullptr};
  torch::nn::Sequential leaf_head_{nullptr};  ///< the leaf/internal classifier
  Linear head_{nullptr};                      ///< classifier: root tokens (mean) → class logits
  torch::Tensor timesteps_;                   ///< (max depth + 1)×C fixed sinusoids (paper eq. 7)
};
TORCH_MODULE(HtmModel);

/// Parameters of `model` that one training step on `input` would update: those the output or
/// the decisions' log-probabilities depend on, and those `also` (when given) computes from the
/// pass, such as the estimator's value heads (unused parts of plugins, such as an image
/// adapter's unlifter in a classifier, do not count). Leaves every gradient cleared.
/// `tree` is the input's Batch::tree, for policies that read the truth.
int64_t participating_parameters(Model& model, const torch::Tensor& input, const std::vector<int64_t>& schedule,
                                 const torch::Tensor& tree = {},
                                 const std::function<torch::Tensor(const ForwardResult&)>& also = {});
/// All parameters of `model`.
int64_t count_parameters(const torch::nn::Module& model);

}  // namespace htm
