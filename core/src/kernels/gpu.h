// The gpu backend (kernels/backend.h): torch ops chosen for a device that
// runs thousands of threads and pays for every launch and every wait on the host. They run on
// any device, so the CPU suite tests them against their definitions (tests/kernels_test.cpp);
// a tensor on a GPU takes them unless runtime.kernels = "portable".
//   - Random draws on the tensor's device, from a generator seeded once per call with one
//     64-bit draw of the run's own generator (Philox on CUDA): nothing is drawn on the host.
//   - Attention through torch's fused scaled-dot-product attention (flash / memory-efficient
//     kernels where the libtorch has them), its dropout the fused kernel's own.
//   - bf16 products on tensor cores: operands cast to bfloat16, products in bf16 with fp32
//     accumulation, outputs back to fp32 (autocast's rule); the policy's scores stay fp32.
//   - The pair sampler as a greedy matching found in rounds of mutual best pairs (a few rounds,
//     not r): the same pairs, in the same order, as the portable sampler's r rounds on the same
//     keys.
//   - AdamW as a handful of multi-tensor (foreach) launches for all parameters, and the
//     gradients of parameters used at several depths summed likewise, not one add a use.
//   - The point-set loss's exact matching on the device (N ≤ 16), by dynamic programming over
//     subsets in a few launches a layer, where the reference runs the Hungarian method on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "kernels/backend.h"
#include "kernels/graph_draws.h"

namespace htm::gpu {

/// The gpu backend: what a tensor off the CPU runs (and every tensor under runtime.kernels =
/// "gpu": the CPU suite tests it so). Its operations are documented on htm::Backend; below, how
/// they differ from the reference.
class GpuBackend final : public Backend {
 public:
  const char* name() const override { return "gpu"; }
  /// bf16 products on tensor cores where the precision says so (operands cast to bfloat16, fp32 out).
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const override;
  /// In training, where the activation between the two is at least 1 MiB in fp32, it is computed
  /// again in backward instead of kept (the unfused gradients bit for bit); below that the
  /// unfused ops, one launch fewer in backward.
  at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias) const override;
  at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                         const at::Tensor& weight, const at::Tensor& bias) const override;
  /// In training, where x is at least 1 MiB in fp32, x alone is kept and the normalised tokens
  /// computed again in backward (the gradients of the ops apart bit for bit).
  std::pair<at::Tensor, at::Tensor> norm_linear2(const at::Tensor& x, const at::Tensor& norm_weight,
                                                 const at::Tensor& norm_bias, double eps, const at::Tensor& w1,
                                                 const at::Tensor& b1, const at::Tensor& w2,
                                                 const at::Tensor& b2) const override;
  /// In training, where the hidden activation is at least 1 MiB in fp32, x alone is kept (fc1's
  /// product twice; the gradients of the ops apart bit for bit); below that the ops apart.
  at::Tensor norm_mlp(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                      const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                      const at::Tensor& b2) const override;
  /// torch's fused scaled-dot-product attention (its dropout the fused kernel's own, seeded per
  /// call from the stream).
  at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads, double p,
                             uint64_t seed, int64_t first) const override;
  /// On a GPU one fused kernel (a one-byte mask kept for backward) from the device's default
  /// generator seeded per call with stream (seed, first); on the CPU a mask from that stream.
  at::Tensor dropout(const at::Tensor& x, double p, uint64_t seed, int64_t first) const override;
  /// Drawn on like's device from one seed of `generator` (graph_draws.h: GraphDraws).
  at::Tensor gumbel_like(const at::Tensor& like, at::Generator generator) const override;
  at::Tensor normal_like(const at::Tensor& like, c10::optional<at::Generator> generator) const override;
  /// match_pairs(logits, gumbel noise, r).
  std::pair<at::Tensor, at::Tensor> sample_disjoint_pairs(const at::Tensor& logits, int64_t r,
                                                          at::Generator generator) const override;
  std::pair<at::Tensor, at::Tensor> greedy_pairs(const at::Tensor& logits, int64_t r) const override;
  /// A block of evenly spaced rows and columns as a strided view of a T×T of −∞, matched on the
  /// device with nothing copied from the host; any other block by the reference's scan.
  std::pair<at::Tensor, at::Tensor> greedy_block_pairs(const at::Tensor& scores, int64_t r,
                                                       const std::vector<int64_t>& row_token,
                                                       const std::vector<int64_t>& col_token, int64_t T) const override;
  /// exact_pair_log_prob where built, else the reference.
  at::Tensor pair_log_prob(const at::Tensor& masked, const at::Tensor& src, const at::Tensor& dst) const override;
  /// masked_pair_entropy where built, else the reference.
  at::Tensor pair_entropy(const at::Tensor& masked) const override;
  /// kept_tokens' CUDA launch where built, else the reference.
  at::Tensor kept_tokens(const at::Tensor& src, int64_t T) const override;
  /// N ≤ kMaxDeviceAssignment on the device with no read-back; larger sets by the reference.
  at::Tensor min_cost_assignment(const at::Tensor& cost) const override;
  /// sum_shared_gradients_at_once, where summing_shared_gradients() (the default).
  void before_backward(const at::Tensor& root) const override;
  /// Nothing read back: the norms in one multi-tensor launch, the scale in one more where the
  /// torch has a multi-tensor multiply by a tensor (2.1 and later; else one launch a gradient).
  void clip_gradients(const std::vector<at::Tensor>& params, double max_norm) const override;
  /// A handful of multi-tensor (foreach) launches for all parameters.
  void adamw_update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& exp_avg,
                    std::vector<at::Tensor>& exp_avg_sq, const std::vector<at::Tensor>& grads,
                    const AdamWStep& step) const override;
};

// --- htm's CUDA kernels and the matching behind the operations above (also tested alone) --------

/// The first r pairs the greedy rule takes (the best key among pairs of unused tokens, key =
/// logit + noise; where every such key is −∞, the best noise), found as a greedy matching in
/// rounds of mutual best pairs and ordered by key. `rounds`, if given, receives the number of
/// rounds it took (0 where the CUDA kernel ran them: a CUDA tensor, where nvcc built
/// greedy_matching.cu, T ≤ 1024, float keys; HTM_CUDA_MATCHING=0 keeps the rounds here). Under a
/// capture (graph_draws.h) a fixed number of rounds, raising a flag where they fell short.
std::pair<at::Tensor, at::Tensor> match_pairs(const at::Tensor& logits, const at::Tensor& noise, int64_t r,
                                              int64_t* rounds = nullptr);

/// The pair sampler's exact sequential log-probability (Backend::pair_log_prob) in two CUDA
/// launches, forward and backward (pair_log_prob.cu, gpu_log_prob.cpp), from B×T×T float logits
/// already bounded with the diagonal at −∞ and the B×r drawn pairs: B×r, where nvcc built the
/// kernels, masked is a CUDA tensor, T ≤ 1024 and 1 ≤ r ≤ ⌊T/2⌋; otherwise an undefined tensor
/// (GpuBackend then runs the reference). HTM_CUDA_LOGPROB=0 keeps the reference.
at::Tensor exact_pair_log_prob(const at::Tensor& masked, const at::Tensor& src, const at::Tensor& dst);

/// The entropy of the first draw's distribution (Backend::pair_entropy) in one CUDA launch
/// forward and one backward, from the same masked logits: B, where exact_pair_log_prob's kernels
/// are built and take a CUDA tensor of 2 ≤ T ≤ 1024 tokens; otherwise an undefined tensor.
at::Tensor masked_pair_entropy(const at::Tensor& masked);

/// Whether htm's CUDA kernel named by `variable` (HTM_CUDA_MATCHING, HTM_CUDA_ASSIGNMENT,
/// HTM_CUDA_LOGPROB, HTM_CUDA_KEPT) may run: unless the environment sets it to 0.
bool cuda_kernel_wanted(const char* variable);

/// An error naming `kernel` where one of htm's CUDA launches returned a cudaError_t other than 0.
void check_launch(int cuda_error, const std::string& kernel);

/// The tokens a merge layer keeps: every token of T but the B×r sources `src`, in increasing
/// order (B×(T−r) int64), in one CUDA launch (kept_tokens.cu) where nvcc built it, src is a CUDA
/// tensor and T ≤ 1024; otherwise an undefined tensor (GpuBackend then runs the reference).
/// HTM_CUDA_KEPT=0 keeps the torch ops.
at::Tensor kept_tokens(const at::Tensor& src, int64_t T);

/// The most elements a set may have for min_cost_assignment (its work grows as N·2^N).
constexpr int64_t kMaxDeviceAssignment = 16;

/// The exact minimum-cost assignment of each sample's N×N cost (B×N×N, floating point, any
/// device, N ≤ kMaxDeviceAssignment): B×N int64, the column of each row, found on cost's device
/// with no read-back (dynamic programming over subsets of columns; gpu_assignment.cpp): double
/// costs on a CPU by the CUDA kernel's steps on the host, on a GPU by that kernel where nvcc built
/// it (set_assignment.cu; HTM_CUDA_ASSIGNMENT=0 keeps the layers), else by
/// min_cost_assignment_layers. Where several assignments cost the least all of them take the same
/// one (not necessarily the Hungarian method's). A NaN or infinite cost gives some assignment in
/// range (its total is not finite); an error only for a shape it does not take.
at::Tensor min_cost_assignment(const at::Tensor& cost);

/// The same assignment in torch ops, a layer of sets of one size at a time (about 5N launches):
/// what a GPU without htm's kernel runs, and the reference the kernel's steps are tested against.
at::Tensor min_cost_assignment_layers(const at::Tensor& cost);

/// Before `root`'s backward: every parameter used more than once in its graph receives its
/// gradients on round nodes: parameters whose uses arrive in step (a block's, one use a depth)
/// are a group, and a group's round k adds each one's k-th use to its sum in one foreach launch
/// as soon as those uses have arrived, where autograd would add each use as it arrives (a launch
/// each), in the order autograd would have added them (gpu_gradients.cpp). Returns the
/// launches saved: the adds no longer made one at a time (0 where nothing is shared). For a
/// plain backward() of `root` only: the rewritten graph's topological numbers no longer prune a
/// backward given its inputs, and a shared parameter's gradient arrives with its last round.
int64_t sum_shared_gradients_at_once(const at::Tensor& root);

/// Whether the trainer's backward under the gpu kernels sums shared gradients at once (the
/// default), and a scope that sets it on this thread (the tests compare the two).
bool summing_shared_gradients();
class SharedGradientsScope {
 public:
  explicit SharedGradientsScope(bool at_once);
  ~SharedGradientsScope();
  SharedGradientsScope(const SharedGradientsScope&) = delete;
  SharedGradientsScope& operator=(const SharedGradientsScope&) = delete;

 private:
  bool previous_;
};

}  // namespace htm::gpu
