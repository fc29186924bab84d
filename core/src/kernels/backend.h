// The backend seam: every operation the SDK hands to a kernel, declared once. This class is the
// portable backend: its definitions are the reference (plain torch ops on any device:
// kernels/portable.cpp and kernels/backend.cpp), and a faster backend overrides what it speeds up
// and inherits the rest (ggml-backend's table of operations, c10d's CommHookInterface):
//   native  kernels/native/: oneDNN GEMMs, AVX-512 rows, counter-based masks, the race sampler,
//           compiled where the build has HTM_NATIVE_KERNELS, for CPU tensors;
//   gpu     kernels/gpu.h: torch ops with few launches and draws on the tensor's device, and
//           htm's CUDA kernels where nvcc built them, for tensors off the CPU.
// backend_for(t) is the one place a backend is chosen (runtime.kernels and t's device); nothing
// outside kernels/ asks which backend runs. A new backend (Apple's MPS, oneDNN Graph) is one
// folder with a class derived from this one and a line in backend_for.
//
// Shapes: B batch, T tokens, r draws, C channels. The linear family takes float x whose last
// dimension is the weight's input size and a defined bias (kernels.cpp's entry points check and
// fill those); the pair operations take float logits already bounded.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "kernels/kernels.h"

namespace htm {

class Backend {
 public:
  virtual ~Backend() = default;

  /// "portable", "native" or "gpu": what `htm bench` and the logs print.
  virtual const char* name() const;

  // --- The linear family (htm/layers.h, kernels/fused_linear.h) -------------------------------
  virtual at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const;
  /// linear(gelu(h), weight, bias).
  virtual at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias) const;
  /// linear(layer_norm(x), weight, bias) over the last dimension.
  virtual at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                                 double eps, const at::Tensor& weight, const at::Tensor& bias) const;
  /// linear(layer_norm(x), w1, b1) and linear(layer_norm(x), w2, b2): one norm, two products.
  virtual std::pair<at::Tensor, at::Tensor> norm_linear2(const at::Tensor& x, const at::Tensor& norm_weight,
                                                         const at::Tensor& norm_bias, double eps, const at::Tensor& w1,
                                                         const at::Tensor& b1, const at::Tensor& w2,
                                                         const at::Tensor& b2) const;
  /// linear(gelu(linear(layer_norm(x), w1, b1)), w2, b2) keeping x alone for backward (only
  /// asked in training under runtime.recompute = "mlp").
  virtual at::Tensor norm_mlp(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias,
                              double eps, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                              const at::Tensor& b2) const;
  /// out ← a·b for 2-D contiguous a (m×k) and b (k×n), float out; a and b float or bfloat16
  /// (multiplied in fp32). `htm bench` times it beside torch's own product.
  virtual void product_into(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) const;
  /// Whether product_into is the backend's own GEMM, not torch's (`htm bench` times it only then).
  virtual bool own_products() const { return false; }
  /// a·b for each batch item (a B×m×k, b B×k×n, any strides): torch::bmm, with its gradients.
  virtual at::Tensor batched_product(const at::Tensor& a, const at::Tensor& b) const;

  // --- Attention and dropout --------------------------------------------------------------------
  /// softmax(QKᵀ/√d)V over `heads` heads, dropout p on the weights (0: none) drawn from stream
  /// (seed, first): row n of the whole batch's B×h×Tq weights from counter_bits(seed, first + n).
  virtual at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                                     double p, uint64_t seed, int64_t first) const;
  /// x ∘ M, M = 0 or 1/(1−p) per entry, from stream (seed, first) (portable.h: dropout_mask).
  virtual at::Tensor dropout(const at::Tensor& x, double p, uint64_t seed, int64_t first) const;

  // --- Draws (for the whole batch when data-parallel: htm/row_shard.h) --------------------------
  /// Gumbel(0,1) noise shaped like `like`, as −log E with E ~ Exp(1) from `generator`.
  virtual at::Tensor gumbel_like(const at::Tensor& like, at::Generator generator) const;
  /// Standard normal noise shaped like `like` (from torch's global generator where none is given).
  virtual at::Tensor normal_like(const at::Tensor& like, c10::optional<at::Generator> generator) const;

  // --- The pair sampler and its probabilities (htm/policy.h) ------------------------------------
  /// r disjoint pairs per sample from B×T×T logits: Gumbel keys from `generator`, then r rounds
  /// of the best key among pairs of unused tokens. {src, dst}, each B×r int64.
  virtual std::pair<at::Tensor, at::Tensor> sample_disjoint_pairs(const at::Tensor& logits, int64_t r,
                                                                  at::Generator generator) const;
  /// The first r pairs of the greedy rule on the logits alone (ties to the lower flat index).
  virtual std::pair<at::Tensor, at::Tensor> greedy_pairs(const at::Tensor& logits, int64_t r) const;
  /// The same on a block of scores: row a is token row_token[a], column c token col_token[c] of T.
  virtual std::pair<at::Tensor, at::Tensor> greedy_block_pairs(const at::Tensor& scores, int64_t r,
                                                               const std::vector<int64_t>& row_token,
                                                               const std::vector<int64_t>& col_token, int64_t T) const;
  /// The sampler's exact sequential log-probability of the drawn pairs (B×r) from B×T×T logits
  /// with the diagonal at −∞: draw k normalised over the pairs of tokens unused before it.
  virtual at::Tensor pair_log_prob(const at::Tensor& masked, const at::Tensor& src, const at::Tensor& dst) const;
  /// The entropy of the first draw's distribution (B) from the same masked logits.
  virtual at::Tensor pair_entropy(const at::Tensor& masked) const;
  /// The tokens a merge layer keeps: every token of T but the B×r sources, in increasing order.
  virtual at::Tensor kept_tokens(const at::Tensor& src, int64_t T) const;
  /// The minimum-cost assignment of each sample's N×N cost (B×N×N): B×N, the column of each row.
  virtual at::Tensor min_cost_assignment(const at::Tensor& cost) const;

  // --- The optimiser's step ---------------------------------------------------------------------
  /// Before the backward of `root` (a training step's loss): the gpu backend sums the gradients
  /// of shared parameters in rounds; the others do nothing.
  virtual void before_backward(const at::Tensor& root) const;
  /// The gradients of `params` scaled to a total 2-norm of at most max_norm, as
  /// torch::nn::utils::clip_grad_norm_ scales them.
  virtual void clip_gradients(const std::vector<at::Tensor>& params, double max_norm) const;
  /// One AdamW update of every parameter (each its own state, one device).
  virtual void adamw_update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& exp_avg,
                            std::vector<at::Tensor>& exp_avg_sq, const std::vector<at::Tensor>& grads,
                            const AdamWStep& step) const;
};

/// The backend an operation on `t` runs: runtime.kernels = "portable" the portable one; "gpu" the
/// gpu one; "native" (the default) the native one for a CPU tensor where it is built, the gpu one
/// for any other device, the portable one otherwise.
const Backend& backend_for(const at::Tensor& t);

/// Each backend by name, for tests and benchmarks that compare them.
const Backend& portable_backend();
const Backend& gpu_backend();
/// The native backend; the portable one where the build has no native kernels.
const Backend& native_backend();

}  // namespace htm
