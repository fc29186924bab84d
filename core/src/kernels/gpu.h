// The GPU kernels behind the backend seam (kernels/kernels.h): torch ops chosen for a device that
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

#include "kernels/kernels.h"

namespace htm::gpu {

/// While one lives on this thread, the gpu kernels draw as a CUDA graph can replay them (a
/// training step under runtime.cuda_graph, train/step_graph.h): every draw on a GPU comes from the
/// device's default generator as it stands (the step seeds it once), with no per-call seed and no
/// draw of the run's CPU generator. With `fixed_rounds` (a capture) the pair sampler also runs a
/// fixed number of rounds with no read-back, raising a device flag (take_graph_flags()) where
/// they did not finish the matching (none where they cannot fall short: ⌊T/2⌋ rounds); given the
/// same noise it takes the same pairs either way.
class GraphDraws {
 public:
  explicit GraphDraws(bool fixed_rounds = false);
  ~GraphDraws();
  GraphDraws(const GraphDraws&) = delete;
  GraphDraws& operator=(const GraphDraws&) = delete;

 private:
  bool previous_, previous_fixed_;
};

/// A check a kernel could not make on the host under GraphDraws: `raised` (a bool scalar on the
/// device) is true where it failed, and `what` says what failed.
struct GraphFlag {
  at::Tensor raised;
  std::string what;
};
/// Whether a GraphDraws with fixed rounds (a capture: nothing may be read from or copied off the
/// host) lives on this thread.
bool capturing();
/// Whether a GraphDraws lives on this thread (runtime.cuda_graph "on" or "eager": a step or an
/// evaluation that draws, and reads, as a graph can).
bool drawing_as_graph();

/// This thread's flags raised since the last take_graph_flags(), which hands them over.
std::vector<GraphFlag> take_graph_flags();

/// The rounds the pair sampler runs with fixed rounds (a capture) at T tokens: ⌊T/2⌋, which always
/// finish the matching (each round matches at least the best pair left), or the cap set by
/// set_graph_rounds_cap() (runtime.graph_rounds) where that is fewer. Random logits finish in
/// about 2·log₂ T rounds, but a trained policy's logits make a few tokens everyone's best
/// partner, and its matchings then take nearly ⌊T/2⌋ (results/sampler-rounds-cpu-2026-11-28.csv).
int64_t graph_rounds(int64_t T);
/// The most rounds a captured sampler runs (0: ⌊T/2⌋); for the whole process.
void set_graph_rounds_cap(int64_t cap);

/// A generator on `device` seeded with `seed` (on CUDA: Philox, offset 0).
at::Generator seeded_generator(uint64_t seed, const at::Device& device);

/// A seed for one call's draws: the next 64 bits of `generator` (a run's CPU generator, or
/// torch's global one for the dropout streams: kernels.cpp).
uint64_t next_seed(at::Generator generator);

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
/// linear(gelu(h)) and linear(layer_norm(x)): in training, where the activation between the two
/// is at least 1 MiB in fp32, it is computed again in backward instead of kept (the unfused
/// gradients bit for bit); below that the unfused ops, one launch fewer in backward.
at::Tensor gelu_linear(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor norm_linear(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                       const at::Tensor& weight, const at::Tensor& bias);
/// linear(layer_norm(x), w1, b1) and linear(layer_norm(x), w2, b2): in training, where x is at least
/// 1 MiB in fp32, x alone is kept and the normalised tokens computed again in backward (the
/// gradients of the ops apart bit for bit); below that the ops apart.
std::pair<at::Tensor, at::Tensor> norm_linear2(const at::Tensor& x, const at::Tensor& norm_weight,
                                               const at::Tensor& norm_bias, double eps, const at::Tensor& w1,
                                               const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2);
/// linear(gelu(linear(layer_norm(x), w1, b1)), w2, b2) under runtime.recompute = "mlp": in
/// training, where the hidden activation is at least 1 MiB in fp32, x alone is kept and the rest
/// computed again in backward (fc1's product twice; the gradients of the ops apart bit for bit);
/// below that norm_linear then gelu_linear.
at::Tensor norm_mlp(const at::Tensor& x, const at::Tensor& norm_weight, const at::Tensor& norm_bias, double eps,
                    const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2);

/// Multi-head attention without a mask; dropout p on the weights, drawn from stream (seed, first).
at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads, double p,
                           uint64_t seed, int64_t first);

/// x with each entry kept with probability 1 − p (and scaled by 1/(1 − p)), drawn on x's device:
/// on a GPU one fused kernel (a one-byte mask kept for backward) from the device's default
/// generator seeded per call with stream (seed, first); on the CPU a mask from that stream.
at::Tensor dropout(const at::Tensor& x, double p, uint64_t seed, int64_t first);

/// Gumbel(0,1) noise shaped like `like`, drawn on like's device from one seed of `generator`
/// (for the whole batch when data-parallel: row_shard.h).
at::Tensor gumbel_like(const at::Tensor& like, at::Generator generator);

/// Standard normal noise shaped like `like`, likewise.
at::Tensor normal_like(const at::Tensor& like, at::Generator generator);

/// A constant tensor of `device` (an index table, a mask), made by `make` once per (what, n,
/// device) and kept for the process: a step's constants cost no launches after its first. One
/// first made inside a capture (capturing()) is returned but not kept, its memory being the
/// graph's; the eager steps before a capture make them.
at::Tensor device_constant(const std::string& what, int64_t n, const at::Device& device,
                           const std::function<at::Tensor()>& make);

/// r disjoint pairs per sample from B×T×T float logits (already bounded), with Gumbel keys on
/// the device: match_pairs(logits, gumbel noise, r).
std::pair<at::Tensor, at::Tensor> sample_disjoint_pairs(const at::Tensor& logits, int64_t r, at::Generator generator);

/// The first r pairs the greedy rule takes (the best key among pairs of unused tokens, key =
/// logit + noise; where every such key is −∞, the best noise), found as a greedy matching in
/// rounds of mutual best pairs and ordered by key. `rounds`, if given, receives the number of
/// rounds it took (0 where the CUDA kernel ran them: a CUDA tensor, where nvcc built
/// greedy_matching.cu, T ≤ 1024, float keys; HTM_CUDA_MATCHING=0 keeps the rounds here).
std::pair<at::Tensor, at::Tensor> match_pairs(const at::Tensor& logits, const at::Tensor& noise, int64_t r,
                                              int64_t* rounds = nullptr);

/// The pair sampler's exact sequential log-probability (sampling.cpp's pair_log_prob, form
/// "exact") in two CUDA launches, forward and backward (pair_log_prob.cu, gpu_log_prob.cpp), from
/// B×T×T float logits already bounded with the diagonal at −∞ and the B×r drawn pairs: B×r, where
/// nvcc built the kernels, masked is a CUDA tensor, T ≤ 1024 and 1 ≤ r ≤ ⌊T/2⌋; otherwise an
/// undefined tensor (the caller's torch ops then). HTM_CUDA_LOGPROB=0 keeps the torch ops.
at::Tensor exact_pair_log_prob(const at::Tensor& masked, const at::Tensor& src, const at::Tensor& dst);

/// The entropy of the first draw's distribution (sampling.cpp's pair_entropy) in one CUDA launch
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
/// tensor and T ≤ 1024; otherwise an undefined tensor (the caller's torch ops then).
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

/// The gradients of `params` scaled as torch::nn::utils::clip_grad_norm_ scales them (to a total
/// 2-norm of at most max_norm), with nothing read to the host: the norms in one multi-tensor
/// launch, the scale in one more where the torch has a multi-tensor multiply by a tensor (2.1
/// and later; else one launch a gradient). torch's own reads the norm back, a wait for the device.
void clip_gradients(const std::vector<at::Tensor>& params, double max_norm);

/// One AdamW update of every parameter at once (each parameter's own state; one step for all).
void adamw_update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& exp_avg,
                  std::vector<at::Tensor>& exp_avg_sq, const std::vector<at::Tensor>& grads, const AdamWStep& step);

}  // namespace htm::gpu
