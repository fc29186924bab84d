// Building blocks the host model is made of, exported for plugin authors to reuse.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace htm {

/// Inverted dropout: zeroes each entry with probability p and scales the rest by 1/(1-p).
/// Same distribution as torch's, but the mask comes from a fast counter-based generator seeded
/// from torch's global generator: on a CPU, bernoulli_ over attention maps otherwise costs a
/// sixth of a training step.
torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool training);

/// x Wᵀ + b over the last dimension, like torch::linear, with its GEMMs through oneDNN
/// (1.5-2.8x OpenBLAS on AVX-512 here). bias may be undefined.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

/// A drop-in for torch::nn::Linear (same parameters, names and initialisation) using linear().
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in, int64_t out, bool bias = true);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
};
TORCH_MODULE(Linear);

/// softmax(Q Kᵀ/√d) V over `heads` heads of width d = C/heads, with dropout p on the weights
/// when training. q: Bq×Tq×C with Bq = B or 1 (shared queries), k and v: B×Tk×C; returns
/// B×Tq×C with heads concatenated. Fused: the B×h×Tq×Tk weights are never stored; backward
/// recomputes them block by block.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t heads,
                              double dropout, bool training);

/// Multi-head attention of queries over keys/values; self-attention when both are the same.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t dim, int64_t heads, double dropout);
  /// keys/values from kv_tokens (B×Tk×C). If `weights` is given, it receives the B×Tq×Tk
  /// attention averaged over heads; if `keys` is given it receives the B×Tk×C key projection.
  torch::Tensor forward(const torch::Tensor& q_tokens, const torch::Tensor& kv_tokens, torch::Tensor* weights = nullptr,
                        torch::Tensor* keys = nullptr);
  /// Projects B×Tk×C tokens to keys and values (each B×Tk×C).
  std::pair<torch::Tensor, torch::Tensor> key_values(const torch::Tensor& kv_tokens);
  /// key_values(norm(kv_tokens)) as one product (the kernels' norm_linear): the normalised tokens
  /// are computed again in backward instead of kept, kv_tokens are kept instead (less memory where
  /// the caller keeps kv_tokens anyway). The same values and gradients as the two calls apart.
  std::pair<torch::Tensor, torch::Tensor> norm_key_values(const torch::Tensor& kv_tokens,
                                                          const torch::nn::LayerNormImpl& norm);
  /// Attention given precomputed keys/values.
  torch::Tensor attend(const torch::Tensor& q_tokens, const torch::Tensor& keys, const torch::Tensor& values,
                       torch::Tensor* weights = nullptr);
  /// Self-attention of norm(x): forward(norm(x), norm(x), weights), with the norm and the query and
  /// key/value products as one node where the weights are not asked for (the kernels'
  /// norm_linear2: x is kept for backward, not its normalised copy too). The same values and
  /// gradients.
  torch::Tensor norm_forward(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm,
                             torch::Tensor* weights = nullptr);
  /// attend(norm(q_tokens), keys, values) with the norm and the query product as one (norm_linear):
  /// q_tokens are kept for backward, not their normalised copy too. The same values and gradients.
  torch::Tensor norm_attend(const torch::Tensor& q_tokens, const torch::nn::LayerNormImpl& norm,
                            const torch::Tensor& keys, const torch::Tensor& values);

 private:
  int64_t heads_;
  double dropout_;
  Linear q_{nullptr}, kv_{nullptr}, out_{nullptr};
};
TORCH_MODULE(Attention);

/// fc2(GELU(fc1(norm(x)))): a pre-norm MLP's body from a plugin's own modules (its parameters
/// and names), through the kernels in force, which keep less of it for backward than the modules
/// one by one (x and fc1's output where they are large; under runtime.recompute = "mlp" x alone).
/// The same values and gradients as the modules one by one.
torch::Tensor norm_mlp(const torch::Tensor& x, const torch::nn::LayerNormImpl& norm, const LinearImpl& fc1,
                       const LinearImpl& fc2);
/// The same of a Sequential of exactly LayerNorm, htm::Linear, GELU, htm::Linear (its modules keep
/// their names: "0", "1", "3"); any other layout is an Error.
torch::Tensor norm_mlp(const torch::Tensor& x, const torch::nn::Sequential& mlp);

/// Pre-norm token MLP with residual: x + Dropout(W2 GELU(W1 LN(x))).
class ResidualMlpImpl : public torch::nn::Module {
 public:
  ResidualMlpImpl(int64_t dim, int64_t ratio, double dropout);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::LayerNorm norm_{nullptr};
  Linear fc1_{nullptr}, fc2_{nullptr};
  double dropout_;
};
TORCH_MODULE(ResidualMlp);

/// Token MLP in → hidden → out (Linear, GELU, Linear): the body of merge and unmerge operators.
/// With `residual_form` its input is LayerNorm'd and its last layer starts at zero, so an
/// operator that adds it to a residual path (the mean of a merged pair, the parent of an
/// unmerged one) starts as that path: information passes through a deep merge chain at
/// initialisation instead of shrinking at every stacked MLP (docs/training.md).
class TokenMlpImpl : public torch::nn::Module {
 public:
  TokenMlpImpl(int64_t in, int64_t hidden, int64_t out, bool residual_form);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::LayerNorm norm_{nullptr};
  Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(TokenMlp);

}  // namespace htm
