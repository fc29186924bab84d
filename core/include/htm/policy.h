// Policy plugins decide which pairs merge in the encoder and which tokens unmerge in the decoder.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "htm/layers.h"
#include "htm/plugin.h"

namespace htm {

/// Which log-probability a policy reports for the decisions it sampled (`estimator.log_prob`).
enum class LogProbForm {
  /// Of what was actually drawn: each pair (token) under the softmax renormalised over the pairs
  /// (tokens) still allowed after the draws before it. Σ over a decision is its log-probability,
  /// so the score-function estimate is unbiased. A choice with only one outcome (unmerging all
  /// T of T tokens) has log-probability 0 and reports none.
  exact,
  /// The paper's (§3.1.5: "we optimise the original unconstrained distribution"): each pair under
  /// the softmax over all T(T−1) ordered pairs, each token under the softmax over all T. Biased:
  /// E[∇ Σ log p̃] ≠ 0. Kept for faithful reproduction.
  paper,
};

/// What a policy sees when the merging block asks for r pairs. Shapes: B batch, T tokens, C width.
struct MergeContext {
  torch::Tensor tokens;      ///< B×T×C, output of the encoder's transformer block (in the graph)
  int64_t r = 0;             ///< pairs to merge, 0 < r ≤ T/2
  int64_t depth = 1;         ///< 1-based encoder layer
  torch::Tensor attention;   ///< B×T×T transformer-block attention, heads averaged (if needs_attention())
  torch::Tensor cross_keys;  ///< B×T×C keys of the merging block's cross-attention (if needs_cross_keys())
  at::Generator generator;   ///< seeded; every random draw must use it
  bool training = true;
  LogProbForm log_prob_form = LogProbForm::exact;  ///< what MergeDecision::log_prob must hold
  /// The host's bound c on merge-pair logits (estimator.logit_bound; 0: none). A policy that
  /// samples from logits passes it on to the SDK's sampler, pair_log_prob and pair_entropy, which
  /// then read each logit l as c·tanh(l / c) (bound_logits()); one that computes its own
  /// log-softmax applies bound_logits() first. No pair is then more than e^{2c} times likelier
  /// than another, and the score function's gradient fades as a logit nears the bound.
  double logit_bound = 0;
  /// B×T×T, 1 where tokens i and j are the two children of one node of the data's true
  /// hierarchy (Batch::tree), else 0; filled only for policies whose needs_truth() is true and
  /// only when the batch has a tree (undefined otherwise). For oracle studies, never for learning.
  torch::Tensor siblings;
};

/// r disjoint ordered pairs: token src[b,k] is merged into token dst[b,k].
struct MergeDecision {
  torch::Tensor src;       ///< B×r int64
  torch::Tensor dst;       ///< B×r int64
  torch::Tensor log_prob;  ///< B×r log-probability of each chosen pair in the form
                           ///< MergeContext::log_prob_form asks for, in the graph; undefined when
                           ///< the policy has nothing to learn
  torch::Tensor entropy;   ///< B entropy of the distribution the first pair is drawn from, in the
                           ///< graph (for `estimator.entropy`); undefined when nothing is learned
};

struct UnmergeContext {
  torch::Tensor tokens;  ///< B×T×C decoder tokens before unmerging
  int64_t r = 0;         ///< tokens to unmerge, 0 < r ≤ T
  int64_t depth = 1;     ///< 1-based depth this decoder layer mirrors
  at::Generator generator;
  bool training = true;
  LogProbForm log_prob_form = LogProbForm::exact;  ///< what UnmergeDecision::log_prob must hold
  /// When defined (B×r int64), teacher forcing (§3.2.2): the policy must return exactly these
  /// tokens, with their log-probabilities under its own distribution (the cross-entropy target).
  torch::Tensor forced;
};

/// r distinct tokens to split in two.
struct UnmergeDecision {
  torch::Tensor index;     ///< B×r int64
  torch::Tensor log_prob;  ///< B×r, as in MergeDecision
};

class Policy : public Plugin, public torch::nn::Module {
 public:
  ~Policy() override;
  /// Chooses r disjoint ordered pairs (never i→i).
  virtual MergeDecision choose_merges(const MergeContext& ctx) = 0;
  /// Chooses r distinct tokens to unmerge.
  virtual UnmergeDecision choose_unmerges(const UnmergeContext& ctx) = 0;
  /// Whether the host must fill MergeContext::attention (costs a B×T×T tensor per layer).
  virtual bool needs_attention() const { return false; }
  /// Whether the host must fill MergeContext::cross_keys.
  virtual bool needs_cross_keys() const { return false; }
  /// Whether the host must fill MergeContext::siblings (oracle policies; the host refuses to
  /// train or evaluate such a policy on data without a known hierarchy).
  virtual bool needs_truth() const { return false; }
  /// Optional: the merge policy as B×T×T logits, row i scoring token i merged into each j (the
  /// diagonal is ignored), before the host's bound. The contract, as docs/writing-a-plugin.md
  /// and the conformance suite (tests/conformance) state it:
  ///  - undefined (the default): the host cannot measure how the policy varies across inputs
  ///    (policy_variation, policy_structure, the Figure 4 heatmap), and estimator.replay,
  ///    which re-scores earlier draws, refuses the policy;
  ///  - defined, by a policy whose MergeDecision::log_prob is defined: the distribution the
  ///    merges are drawn from, so that for any draw d of choose_merges(ctx),
  ///    d.log_prob == pair_log_prob(merge_logits(ctx), d.src, d.dst, ctx.log_prob_form,
  ///    ctx.logit_bound). Replay trains on it;
  ///  - defined, by a policy that learns nothing (no log_prob): the scores its merges follow,
  ///    for the variation metrics only (a greedy policy's draws need not be samples of them).
  virtual torch::Tensor merge_logits(const MergeContext& ctx) { return {}; }
};

/// The paper's learned unmerge policy (§3.1.3), for policies to reuse: an MLP
/// (LayerNorm → Linear(C, hidden) → GELU → Linear(hidden, 1)) scores each detached token, and
/// r tokens are drawn without replacement from the softmax of the scores.
class UnmergeScorerImpl : public torch::nn::Module {
 public:
  UnmergeScorerImpl(int64_t dim, int64_t hidden);
  UnmergeDecision choose(const UnmergeContext& ctx);

 private:
  torch::nn::Sequential score_{nullptr};
};
TORCH_MODULE(UnmergeScorer);

// Sampling helpers shared by policies (core/src/sdk/sampling.cpp).

/// c·tanh(logits / c) for a bound c > 0 (MergeContext::logit_bound), the logits unchanged for 0.
torch::Tensor bound_logits(const torch::Tensor& logits, double bound);

/// Samples r disjoint ordered pairs from softmax(logits) over the flattened T×T matrix, one pair
/// at a time renormalised over the pairs still allowed — drawn exactly, in one pass, by adding
/// Gumbel noise once, sorting, and greedily accepting pairs of unused tokens. The diagonal is
/// never chosen. logits: B×T×T (any values on the diagonal), read through bound_logits(logits,
/// logit_bound). Returns {src, dst}, each B×r int64.
std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs(const torch::Tensor& logits, int64_t r,
                                                              at::Generator generator, double logit_bound = 0);
/// The r best disjoint pairs per sample, deterministically: the best logit among the ordered
/// pairs of unused tokens, then the next, ties to the lower flat index i·T + j; the diagonal is
/// never chosen. Wherever every logit is finite, the pairs greedy_pairs(logits, r) takes
/// (htm/greedy_pairs.h, a scan on the host), found on the logits' device where the gpu kernels
/// are in force (in rounds of mutual best pairs, nothing read back under a CUDA graph: a greedy
/// policy's step can be captured); elsewhere by that scan, which refuses non-finite logits it
/// would need (htm::NonFinite). logits: B×T×T. Returns {src, dst}, each B×r int64. SDK 6.1.
std::pair<torch::Tensor, torch::Tensor> greedy_disjoint_pairs(const torch::Tensor& logits, int64_t r);
/// The same over a B×R×C block of the T tokens' pairs: row a scores token row_token[a] merged
/// into each token col_token[c], as greedy_pairs(scores, r, row_token, col_token, T) takes them,
/// with r at most min(R, C); on the device where both token lists increase in steps (ToMe's even
/// and odd tokens), by that scan otherwise. SDK 6.1.
std::pair<torch::Tensor, torch::Tensor> greedy_disjoint_pairs(const torch::Tensor& scores, int64_t r,
                                                              const std::vector<int64_t>& row_token,
                                                              const std::vector<int64_t>& col_token, int64_t T);
/// The paper's sampler, one pair at a time: O(r·T²). Same distribution; kept as the reference.
std::pair<torch::Tensor, torch::Tensor> sample_disjoint_pairs_sequential(const torch::Tensor& logits, int64_t r,
                                                                         at::Generator generator,
                                                                         double logit_bound = 0);
/// Samples r distinct indices per row from softmax(scores) without replacement (Gumbel top-k).
/// scores: B×T. Returns B×r int64.
torch::Tensor sample_without_replacement(const torch::Tensor& scores, int64_t r, at::Generator generator);
/// Uniform unmerging for policies with nothing to learn there: r distinct tokens drawn uniformly,
/// or, under teacher forcing, exactly UnmergeContext::forced. log_prob is undefined.
UnmergeDecision uniform_unmerges(const UnmergeContext& ctx);
/// B×r log-probabilities of the pairs sample_disjoint_pairs drew from `logits`, in draw order.
/// exact: pair k under the softmax over the pairs of tokens unused by pairs 0..k−1 (their sum
/// is the log-probability of the draw); paper: every pair under the softmax over all T(T−1).
/// The diagonal is masked in both; the logits are read through bound_logits(logits, logit_bound).
torch::Tensor pair_log_prob(const torch::Tensor& logits, const torch::Tensor& src, const torch::Tensor& dst,
                            LogProbForm form, double logit_bound = 0);
/// B×r log-probabilities of the tokens sample_without_replacement drew from `scores` (B×T), in
/// draw order. exact: token k under the softmax over the tokens not drawn before it
/// (Plackett–Luce), and undefined when r = T (every token is chosen: nothing was decided);
/// paper: every token under the softmax over all T.
torch::Tensor token_log_prob(const torch::Tensor& scores, const torch::Tensor& index, LogProbForm form);
/// B: entropy of softmax(bound_logits(logits, logit_bound)) over the T(T−1) off-diagonal pairs
/// (the first draw's distribution).
torch::Tensor pair_entropy(const torch::Tensor& logits, double logit_bound = 0);
/// B×T×T pair logits Σ_h w_h q_h·k_h / √(C/h) of tokens x (B×T×C), q = query(x), k = key(x),
/// over the heads h of head_weight (w): the learned policies' bilinear score, with the head
/// weights folded into the queries so only one B×T×T matrix is formed.
torch::Tensor bilinear_pair_logits(const torch::Tensor& x, Linear& query, Linear& key,
                                   const torch::Tensor& head_weight);
/// bilinear_pair_logits(norm(x), query, key, head_weight) with the norm and the two products as one
/// node: x is kept for backward, not its normalised copy too (the same values and gradients).
torch::Tensor bilinear_pair_logits(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm, Linear& query,
                                   Linear& key, const torch::Tensor& head_weight);

}  // namespace htm
