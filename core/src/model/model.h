// The hierarchical token-merging autoencoder (paper §3.1), assembled once from the parts its
// options choose (assembly.cpp, the one file that reads ModelOptions' enums): the blocks
// (blocks.h), the encoder (encoder.cpp: depth signal, mixer, merge layer), the decoder
// (decoder.cpp: unmerge layer, mixer; the policy's splits or the encoder's mirrored) and a head
// (model.cpp: reconstruct, or classify from the root). What a pass takes and gives: pass.h.
// Shapes: B batch, T tokens, C width, h heads, r pairs merged at a layer, D depth actually run
// (≤ L, the schedule's length).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "htm/adapter.h"
#include "htm/layers.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "model/blocks.h"
#include "model/options.h"
#include "model/pass.h"
#include "model/schedule.h"

namespace htm {

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
  bool has_leaf_classifier() const { return !leaf_head_.is_empty(); }
  /// The input reconstructed from the population after encoder layer `level` (result.populations,
  /// 1 ≤ level < the pass's depth) by decoder layers level…1, with the pass's schedule and, when
  /// unmerging mirrors, its splits; the unmerge draws join result.draws. The anytime loss's
  /// reconstructions (ForwardHooks::levels → ForwardResult::levels).
  torch::Tensor reconstruct_level(ForwardResult& result, int64_t level, const std::vector<int64_t>& schedule,
                                  at::Generator generator);

  int64_t num_tokens() const { return adapter_->num_tokens(); }
  Adapter& adapter() { return *adapter_; }
  /// The policy deciding now: the trained one, or the one switch_policy() put in its place.
  Policy& policy() { return switched_ ? *switched_ : *policy_; }
  /// Decides with `policy` instead of the trained one until called with nullptr (evaluating the
  /// same weights under another policy); the trained policy's parameters stay where they are.
  void switch_policy(std::shared_ptr<Policy> policy) { switched_ = std::move(policy); }
  /// In evaluation (not training, not a replay), merge each layer's best pairs of the policy's
  /// merge_logits() greedily instead of calling choose_merges() (train.eval_greedy). A policy
  /// without logits, or whose logits are all equal (`random`), still decides by itself; unmerges
  /// are the policy's own either way.
  void greedy_merges(bool on) { greedy_merges_ = on; }

 private:
  /// Where each token of the current population sits in the data's true tree, for policies
  /// that read it: node (B×T, −1 when the token is no node of the truth), parent (B×(2N−1), −1
  /// at the root).
  struct Truth {
    torch::Tensor node, parent;
  };
  /// The leaf/internal classifier's lessons of one pass (model.cpp): populations, taken
  /// detached, with 0 = leaf, 1 = internal, −1 = no label. The encoder's are labelled by where
  /// each token came from (slides); the decoder's where the label is certain: the tokens it
  /// splits are internal, its last population is leaves.
  struct LeafLessons {
    explicit LeafLessons(const torch::Tensor& lifted);
    /// After an encoder layer that merged `merged` (nullptr: r = 0) and kept `keep`.
    void encoded(const torch::Tensor& population, const MergeDecision* merged, const torch::Tensor& keep);
    /// Before a decoder layer that split `chosen` of `before`.
    void decoded(const torch::Tensor& before, const torch::Tensor& chosen);
    std::vector<std::pair<torch::Tensor, torch::Tensor>> lessons;
    torch::Tensor internal;  ///< B×T of the current encoder population
  };
  /// The head a pass ends in (model.cpp): the decoder then the adapter's unlift, or a
  /// classifier's linear head on the root tokens' mean (§4.1).
  using Head = void (HtmModelImpl::*)(ForwardResult& result, const std::vector<int64_t>& schedule,
                                      at::Generator generator, const ForwardHooks* hooks, LeafLessons* leaf);
  /// The factor a draw's merged or unmerged tokens are multiplied by, B×r×1, from its B×r
  /// log-probabilities (A.4); undefined: none.
  using Scale = torch::Tensor (*)(const torch::Tensor& log_prob);

  // The adapter's and the policy's side of a pass (model.cpp).
  /// The adapter's lift and unlift, marked as the adapter's calls (plugin_scope.h).
  torch::Tensor lift(const torch::Tensor& input);
  torch::Tensor unlift(const torch::Tensor& tokens);
  /// The truth's tracker for this pass, or nothing when the policy does not read it.
  std::optional<Truth> truth_for(const torch::Tensor& input, const ForwardHooks* hooks);
  void reconstruct_head(ForwardResult& result, const std::vector<int64_t>& schedule, at::Generator generator,
                        const ForwardHooks* hooks, LeafLessons* leaf);
  void classify_head(ForwardResult& result, const std::vector<int64_t>& schedule, at::Generator generator,
                     const ForwardHooks* hooks, LeafLessons* leaf);
  /// B×T×2 leaf/internal logits of detached tokens.
  torch::Tensor leaf_logits(const torch::Tensor& tokens);

  // The encoder (encoder.cpp).
  /// Encoder layers 1…D on the lifted tokens: result's encoder_tokens, populations, merges,
  /// draws (and mirrors, when the decoder mirrors), the leaf classifier's lessons; returns the root.
  torch::Tensor encode(ForwardResult& result, torch::Tensor x, const std::vector<int64_t>& schedule,
                       at::Generator generator, std::optional<Truth> truth, const ForwardHooks* hooks,
                       LeafLessons* leaf);
  /// Tokens entering encoder layer d: depth signal, then the losses' rewrite (layer_entry).
  torch::Tensor enter(const torch::Tensor& x, int64_t d, const ForwardHooks* hooks);
  /// The encoder's transformer block (`attention`, if given, receives its heads' mean weights),
  /// or the tokens as they are without mixing.
  torch::Tensor mix_encoder(const torch::Tensor& x, torch::Tensor* attention);
  /// Returns the merged population; `keep` (if given) receives, for each of its tokens, the
  /// index in x it came from (B×(T−r)).
  MergeDecision greedy_decision(const MergeContext& ctx);
  torch::Tensor merge_layer(const torch::Tensor& x, int64_t r, int64_t depth, const torch::Tensor& attention,
                            at::Generator generator, ForwardResult& result, torch::Tensor* keep = nullptr,
                            Truth* truth = nullptr, const MergeDecision* replayed = nullptr,
                            const ForwardHooks* hooks = nullptr);
  /// B×r: each merged pair's error after the merge operator's unmerge (Draw::pair_error).
  torch::Tensor pair_error(const Draw& draw);

  // The decoder (decoder.cpp).
  /// `forced` (B×r): teacher forcing, unmerge these tokens. `chosen` (if given) receives the
  /// B×r indices unmerged.
  torch::Tensor unmerge_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                              ForwardResult& result, const torch::Tensor& forced = {}, torch::Tensor* chosen = nullptr);
  /// One decoder layer at `depth`: the timestep signal, the unmerging block, the transformer
  /// block. `forced` and `chosen` as for unmerge_layer.
  torch::Tensor decoder_layer(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator,
                              ForwardResult& result, const torch::Tensor& forced = {}, torch::Tensor* chosen = nullptr);
  /// Decoder layers from…1 on `y`, following result.mirrors where the encoder recorded them;
  /// `record`: the main pass, whose populations fill decoder_tokens and teach `leaf`.
  torch::Tensor decode(ForwardResult& result, torch::Tensor y, int64_t from, const std::vector<int64_t>& schedule,
                       at::Generator generator, bool record, LeafLessons* leaf);
  torch::Tensor timestep(int64_t depth) const;

  /// The splits that undo a merge layer, from the tokens it kept (B×(T−r)) and its decision
  /// (the last of `merges`; none when r = 0).
  static MirrorSplit mirror_of(const torch::Tensor& keep, const std::vector<MergeDecision>& merges, int64_t T,
                               int64_t r);
  /// A decoded population put back in the order of the tokens before the merge.
  static torch::Tensor reorder(const torch::Tensor& z, const torch::Tensor& origin);
  /// A policy's MergeContext or UnmergeContext with what both carry: the tokens, r, the depth,
  /// the generator, the mode and the log-probability form asked for.
  template <class Context>
  Context context_for(const torch::Tensor& x, int64_t r, int64_t depth, at::Generator generator) const {
    Context ctx;
    ctx.tokens = x;
    ctx.r = r;
    ctx.depth = depth;
    ctx.generator = std::move(generator);
    ctx.training = is_training();
    ctx.log_prob_form = options_.log_prob_form;
    return ctx;
  }
  /// x's tokens at `index` (B×r) → B×r×C.
  static torch::Tensor gather_tokens(const torch::Tensor& x, const torch::Tensor& index);

  ModelOptions options_;
  std::shared_ptr<Adapter> adapter_;
  std::shared_ptr<Policy> policy_;
  std::shared_ptr<Policy> switched_;  ///< deciding instead of policy_ when set
  bool greedy_merges_ = false;        ///< greedy_merges()
  /// The policies whose merge [0] and unmerge [1] decisions had their index values checked
  /// (shapes are checked at every call; values cost two reductions read on the host, so once
  /// per policy, not again after each switch: an evaluation under a graph reads nothing back).
  std::set<const Policy*> values_checked_[2];
  std::shared_ptr<MergeOperator> merge_;
  // The parts the options chose (assembly.cpp). A part the architecture lacks is empty.
  TransformerBlock encoder_block_{nullptr}, decoder_block_{nullptr};  ///< none: no mixing
  RefineBlock merge_refine_{nullptr}, unmerge_refine_{nullptr};       ///< no unmerge_refine_: a classifier
  torch::nn::LayerNorm head_norm_{nullptr};
  torch::nn::Sequential leaf_head_{nullptr};  ///< the leaf/internal classifier
  Linear head_{nullptr};                      ///< classifier: root tokens (mean) → class logits
  Head end_ = nullptr;                        ///< reconstruct_head or classify_head
  Scale scale_ = nullptr;                     ///< no factor, or the probability
  bool mirrors_ = false;                      ///< the encoder records its merges for the decoder to undo
  torch::Tensor timesteps_;                   ///< (max depth + 1)×C fixed sinusoids (paper eq. 7)
};

/// Another policy decides in `model` until this object goes (HtmModelImpl::switch_policy), however
/// the scope ends: evaluation under train.eval_policies, a self-critical baseline's pass.
class PolicySwitch {
 public:
  PolicySwitch(HtmModelImpl& model, std::shared_ptr<Policy> policy) : model_(model) {
    model_.switch_policy(std::move(policy));
  }
  ~PolicySwitch() { model_.switch_policy(nullptr); }
  PolicySwitch(const PolicySwitch&) = delete;
  PolicySwitch& operator=(const PolicySwitch&) = delete;

 private:
  HtmModelImpl& model_;
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
