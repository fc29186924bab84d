// The GPU kernels (kernels/gpu.h): torch ops with few launches, random draws on the device.
#include "kernels/gpu.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "htm/error.h"
#include "htm/row_shard.h"
#include "kernels/counter_rng.h"
#include "kernels/portable.h"
#include "kernels/precision.h"

#if HTM_CUDA_KERNELS_BUILT
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/greedy_matching.h"

// greedy_matching.cu (nvcc): the matching in one launch, queued on `stream`; a cudaError_t.
extern "C" int htm_cuda_greedy_pairs(const float* logits, const float* noise, int64_t B, int64_t T, int64_t r,
                                     int64_t* src, int64_t* dst, int64_t* ranks, void* stream);
#endif

namespace htm::gpu {

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

bool in_bf16() { return matmul_precision() == Precision::bf16; }

// An operand of a matrix product: bf16 where the precision in force says so (tensor cores).
torch::Tensor operand(const torch::Tensor& t) { return in_bf16() ? t.to(torch::kBFloat16) : t; }

// The draws of a tensor shaped like `like`, for the whole batch when data-parallel (row_shard.h):
// `draw` fills a tensor of the whole batch's rows on like's device; this process keeps its own.
template <class Draw>
torch::Tensor rows_like(const torch::Tensor& like, Draw&& draw) {
  const DrawRows d = like.dim() > 0 ? draw_rows(like.size(0)) : DrawRows{0, 0};
  auto sizes = like.sizes().vec();
  if (!sizes.empty()) sizes[0] = d.rows;
  auto t = draw(torch::empty(sizes, like.options().dtype(torch::kFloat)));
  if (!sizes.empty() && d.rows != like.size(0)) t = t.narrow(0, d.offset, like.size(0)).contiguous();
  return t;
}

// The generator of one call's draws on `device`: under GraphDraws the device's default generator
// as it stands, else one seeded with the next draw of `generator`.
at::Generator draw_generator(at::Generator generator, const at::Device& device) {
  if (!drawing_as_graph()) return seeded_generator(next_seed(std::move(generator)), device);
  return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
}

// A dropout's generator for the stream (seed, first): under GraphDraws the device's default one
// as it stands; on a GPU otherwise the default one seeded per call (the fused kernels draw from it).
at::Generator dropout_generator(uint64_t stream, const at::Device& device) {
  if (drawing_as_graph()) return draw_generator(at::Generator(), device);
  if (device.is_cpu()) return seeded_generator(stream, device);
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(stream);
  return gen;
}

}  // namespace

bool cuda_kernel_wanted(const char* variable) {
  const char* env = std::getenv(variable);
  return env == nullptr || std::string(env) != "0";
}

void check_launch(int cuda_error, const std::string& kernel) {
  if (cuda_error != 0)
    throw Error(kernel + "'s CUDA kernel did not launch (CUDA error " + std::to_string(cuda_error) + ")");
}

torch::Tensor GpuBackend::fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          int64_t heads, double p, uint64_t seed, int64_t first) const {
  const int64_t B = k.size(0), Tq = q.size(1), Tk = k.size(1), C = q.size(2), d = C / heads;
  const bool backward = portable::in_training({&q, &k, &v});
  portable::count_product(B * heads * Tq, Tk, d, backward);  // the scores
  portable::count_product(B * heads * Tq, d, Tk, backward);  // the weighted values
  auto split = [&](const torch::Tensor& t, int64_t n) {      // b×n×C → B×h×n×d
    auto o = operand(t);
    return (o.size(0) == B ? o : o.expand({B, n, C})).reshape({B, n, heads, d}).transpose(1, 2);
  };
  const uint64_t stream = counter_bits(seed, static_cast<uint64_t>(first));
  torch::Tensor out;
#if TORCH_VERSION_MAJOR >= 2
  // HTM_SDPA_MATH=0 leaves torch's math path out (it keeps each attention's B×h×Tq×Tk weights and
  // their dropout mask): a fused kernel runs, or torch says why none can (check.sh measures it).
  static const bool math_left_out = [] {
    const char* env = std::getenv("HTM_SDPA_MATH");
    if (env == nullptr || std::string(env) != "0") return false;
    at::globalContext().setSDPUseMath(false);
    return true;
  }();
  (void)math_left_out;
  // On a CPU only without dropout (its fused kernel would draw from the CPU's global generator):
  // the same ops as a GPU's step, to count them and their memory on a machine without one.
  if (!q.device().is_cpu() || p == 0) {
    // The fused kernel draws its dropout from the device's default generator: seeded per call
    // from the stream, so the same seed gives the same masks on the same device.
    if (p > 0) dropout_generator(stream, q.device());
    out = at::scaled_dot_product_attention(split(q, Tq), split(k, Tk), split(v, Tk), {}, p);
  }
#endif
  if (!out.defined()) {  // the same maths unfused (a CPU with dropout, a libtorch without the fused kernels)
    auto weights = torch::softmax(torch::matmul(split(q, Tq), split(k, Tk).transpose(-2, -1)).to(torch::kFloat) /
                                      std::sqrt(static_cast<double>(d)),
                                  -1);
    if (p > 0) {
      auto gen = dropout_generator(stream, q.device());
      auto keep = torch::empty(weights.sizes(), weights.options()).bernoulli_(1.0 - p, gen);
      weights = weights * keep.mul_(1.0 / (1.0 - p));
    }
    out = torch::matmul(operand(weights), split(v, Tk));
  }
  return out.transpose(1, 2).reshape({B, Tq, C}).to(torch::kFloat);
}

torch::Tensor GpuBackend::dropout(const torch::Tensor& x, double p, uint64_t seed, int64_t first) const {
  const uint64_t stream = counter_bits(seed, static_cast<uint64_t>(first));
  // On a GPU one fused kernel (mask and product; a one-byte mask kept for backward), drawn from
  // the device's default generator seeded per call, as the fused attention's dropout is.
  auto gen = dropout_generator(stream, x.device());  // its lock released before the kernel takes it
  if (!x.device().is_cpu()) return std::get<0>(at::native_dropout(x, p, true));
  auto keep = torch::empty(x.sizes(), x.options().dtype(torch::kFloat)).bernoulli_(1.0 - p, gen);
  return x * keep.mul_(1.0 / (1.0 - p));
}

torch::Tensor GpuBackend::gumbel_like(const torch::Tensor& like, at::Generator generator) const {
  auto gen = draw_generator(std::move(generator), like.device());
  // E ~ Exp(1) kept above the smallest normal float: −log E stays finite (a draw of exactly 0
  // would be an infinite key).
  return rows_like(like, [&](torch::Tensor t) {
    return t.exponential_(1.0, gen).clamp_min_(std::numeric_limits<float>::min()).log_().neg_();
  });
}

torch::Tensor GpuBackend::normal_like(const torch::Tensor& like, c10::optional<at::Generator> generator) const {
  if (!generator.has_value()) return Backend::normal_like(like, generator);
  auto gen = draw_generator(std::move(*generator), like.device());
  return rows_like(like, [&](torch::Tensor t) { return t.normal_(0.0, 1.0, gen); }).to(like.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> GpuBackend::sample_disjoint_pairs(const torch::Tensor& logits, int64_t r,
                                                                          at::Generator generator) const {
  return match_pairs(logits, gumbel_like(logits, generator), r);
}

std::pair<torch::Tensor, torch::Tensor> match_pairs(const torch::Tensor& logits, const torch::Tensor& noise, int64_t r,
                                                    int64_t* rounds) {
  const int64_t B = logits.size(0), T = logits.size(1);
  if (T > (int64_t{1} << 15)) throw Error("sample_disjoint_pairs: more than 32768 tokens");
  const auto longs = logits.options().dtype(torch::kLong);
#if HTM_CUDA_KERNELS_BUILT
  // On a GPU, the same pairs in one launch (greedy_matching.cu; tested against these rounds by
  // GreedyMatching.* on the CPU, CudaKernels.* on a GPU). HTM_CUDA_MATCHING=0 keeps the rounds.
  static const bool kernel_wanted = cuda_kernel_wanted("HTM_CUDA_MATCHING");
  if (kernel_wanted && logits.is_cuda() && T <= greedy::kMaxTokens && r > 0 && r <= T / 2 && B > 0 &&
      logits.scalar_type() == torch::kFloat && noise.scalar_type() == torch::kFloat) {
    const c10::cuda::CUDAGuard guard(logits.device());
    const auto l = logits.contiguous(), n = noise.to(logits.device()).contiguous();
    auto src = torch::empty({B, r}, longs), dst = torch::empty({B, r}, longs);
    auto ranks = torch::empty({B, T, T}, longs);  // each pair's rank, filled once (the rounds' `both`)
    const int error = htm_cuda_greedy_pairs(l.data_ptr<float>(), n.data_ptr<float>(), B, T, r, src.data_ptr<int64_t>(),
                                            dst.data_ptr<int64_t>(), ranks.data_ptr<int64_t>(),
                                            c10::cuda::getCurrentCUDAStream().stream());
    check_launch(error, "the pair sampler");
    if (rounds != nullptr) *rounds = 0;  // inside the kernel: not read back
    return {src, dst};
  }
#endif
  // Every ordered pair's rank as one int64, larger = taken first by the greedy rule: a finite key
  // beats any pair whose key is −∞ (those go by noise alone), then the key's value (its float
  // bits made order-preserving), then the lower flat index (the portable arg-max's first).
  // In int64: finite·2⁶² + (key bits, order-preserving, in [−2³¹, 2³¹))·2³⁰ + the constant
  // base, whose off-diagonal entries are 2⁶¹ + T²−1−(flat index) (the 2⁶¹ moves the bits into
  // [0, 2³²)·2³⁰) and whose diagonal keeps a pair of one token below every other rank (at most
  // −2³⁰, never overflowing): two adds with alphas on a cached base.
  auto keys = logits + noise;
  auto finite = keys > kMinusInf;
  auto value = torch::where(finite, keys, noise) + 0.0f;  // −0 → +0: equal floats, equal bits
  // In int32 (the add below widens them): half the bytes, and no copy to int64 first.
  auto bits = value.contiguous().view(torch::kInt);
  auto ordered = torch::where(bits < 0, bits ^ 0x7fffffff, bits);
  const auto base = device_constant("pair ranks' base", T, logits.device(), [&] {
    auto b = torch::rsub(torch::arange(T * T, longs), T * T - 1 + (int64_t{1} << 61)).view({1, T, T});
    b.diagonal(0, 1, 2).fill_(std::numeric_limits<int64_t>::min() + (int64_t{1} << 61));
    return b;
  });
  auto rank = torch::add(base, ordered, int64_t{1} << 30).add_(finite, int64_t{1} << 62);

  // Greedy matching on the pairs' best orientation: in each round every token points to its best
  // remaining partner, and mutual choices are matched (each is the best pair left at both its
  // tokens, so greedy takes it). With distinct ranks this is greedy's matching exactly. A matched
  // token keeps its pair's rank, whose low 30 bits name the pair's taken orientation; the rows and
  // columns of matched tokens leave `both` in place (no B×T² copy per round).
  auto both = torch::maximum(rank, rank.transpose(1, 2));  // B×T×T, symmetric
  const auto tokens =
      device_constant("token indices", T, logits.device(), [&] { return torch::arange(T, longs).unsqueeze(0); });
  const int64_t unmatched_at_end = B * (T % 2);  // a complete graph: at most one token left per sample
  // Under GraphDraws a fixed number of rounds and no read-back; whether they finished is a flag.
  const int64_t fixed = capturing() ? graph_rounds(T) : 0;
  // Each round's best partner and whether it was mutual, for the end: a token whose row is all
  // taken (−1) points anywhere and may seem mutual with another such token, but its best is −1,
  // which the end leaves out, and its row and column are −1 already. So a round is 5 launches.
  std::vector<torch::Tensor> bests, mutuals;
  int64_t round = 0;
  for (bool more = T > 1; more;) {
    auto [best, choice] = both.max(2);  // B×T
    auto mutual = choice.gather(1, choice) == tokens;
    both.masked_fill_(mutual.unsqueeze(2).logical_or(mutual.unsqueeze(1)), -1);
    bests.push_back(best), mutuals.push_back(mutual);
    // Read back every few rounds (the rounds after the last match change nothing): done when no
    // pair of free tokens is left (every pair of two free tokens has a rank ≥ 0).
    ++round;
    if (fixed > 0)
      more = round < fixed;
    else if (round >= T / 2)  // ⌊T/2⌋ rounds always finish (each matches the best pair left)
      more = false;
    else if (round % 4 == 0)
      more = (both.amax() >= 0).item<bool>();
  }
  // The rank of each token's pair, −1 while unmatched: a matched token's mutual best.
  auto matched =
      T > 1 ? torch::where(torch::stack(mutuals), torch::stack(bests), -1).amax(0) : torch::full({B, T}, -1, longs);
  if (fixed > 0 && fixed < T / 2)  // ⌊T/2⌋ rounds always finish: nothing to check
    raise_graph_flag(
        {(matched < 0).sum() > unmatched_at_end,
         "the pair sampler's " + std::to_string(fixed) + " rounds left tokens unmatched at T = " + std::to_string(T)});
  if (rounds != nullptr) *rounds = round;

  // Greedy takes its pairs in decreasing rank: the r best of the matching, in order. A matched
  // pair's rank stands at both its tokens, and no two pairs share one (the low bits name the
  // pair), so the 2r largest are the r best pairs, each twice in a row: every other one is taken,
  // and its low 30 bits name the taken orientation.
  constexpr int64_t kFlatBits = (int64_t{1} << 30) - 1;
  auto twice = std::get<0>(matched.topk(2 * r, 1, /*largest=*/true, /*sorted=*/true));     // B×2r
  auto best = torch::rsub(twice.slice(1, 0, 2 * r, 2).bitwise_and(kFlatBits), T * T - 1);  // B×r
  return {best.div(T, "floor"), best.remainder(T)};
}

void GpuBackend::clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) const {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  torch::NoGradGuard no_grad;
  // clip_grad_norm_'s arithmetic: the norm of the gradients' norms, max_norm / (norm + 1e-6) at
  // most 1, every gradient multiplied by it.
  const auto total = grads.size() == 1 ? grads[0].norm(2) : torch::stack(at::_foreach_norm(grads)).norm(2);
  const auto scale = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  // _foreach_mul_.Tensor, found by name: a torch before 2.1 has none (nor its C++ declaration);
  // one whose signature differed would refuse the typed handle, and the loop does it then.
  using MulByTensor = void(at::TensorList, const at::Tensor&);
  static const auto by_tensor = []() -> c10::optional<c10::TypedOperatorHandle<MulByTensor>> {
    const auto op = c10::Dispatcher::singleton().findSchema({"aten::_foreach_mul_", "Tensor"});
    if (!op.has_value()) return c10::nullopt;
    try {
      return op->typed<MulByTensor>();
    } catch (const c10::Error&) {
      return c10::nullopt;
    }
  }();
  if (by_tensor.has_value()) return by_tensor->call(grads, scale);
  for (auto& g : grads) g.mul_(scale);
}

void GpuBackend::adamw_update(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& exp_avg,
                              std::vector<torch::Tensor>& exp_avg_sq, const std::vector<torch::Tensor>& grads,
                              const AdamWStep& s) const {
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  at::_foreach_mul_(params, s.decay);
  at::_foreach_mul_(exp_avg, s.beta1);
  at::_foreach_add_(exp_avg, grads, s.rest1);
  at::_foreach_mul_(exp_avg_sq, s.beta2);
  at::_foreach_addcmul_(exp_avg_sq, grads, grads, s.rest2);
  auto denominator = at::_foreach_sqrt(exp_avg_sq);
  at::_foreach_div_(denominator, s.root_bias2);
  at::_foreach_add_(denominator, s.eps);
  at::_foreach_addcdiv_(params, exp_avg, denominator, -s.step_size);
}

std::pair<torch::Tensor, torch::Tensor> GpuBackend::greedy_pairs(const torch::Tensor& logits, int64_t r) const {
  // No noise: the rounds' keys are the logits, and their ties go to the lower flat index, as the
  // scan's do.
  return match_pairs(logits, torch::zeros_like(logits), r);
}

std::pair<torch::Tensor, torch::Tensor> GpuBackend::greedy_block_pairs(const torch::Tensor& scores, int64_t r,
                                                                       const std::vector<int64_t>& row_token,
                                                                       const std::vector<int64_t>& col_token,
                                                                       int64_t T) const {
  const int64_t R = static_cast<int64_t>(row_token.size()), C = static_cast<int64_t>(col_token.size());
  const auto step = [](const std::vector<int64_t>& t) {  // the step of an increasing arithmetic run, or 0
    const int64_t d = t.size() > 1 ? t[1] - t[0] : 1;
    for (size_t k = 1; k < t.size(); ++k)
      if (t[k] - t[k - 1] != d || d <= 0) return int64_t{0};
    return d;
  };
  const int64_t row_step = step(row_token), col_step = step(col_token);
  if (R == 0 || C == 0 || row_step == 0 || col_step == 0)
    return Backend::greedy_block_pairs(scores, r, row_token, col_token, T);
  // The block, a strided view of a T×T of −∞ (never a pair while a finite one is left: r ≤
  // min(R, C) are), nothing copied from the host; its order by a·C + c is the flat index's.
  auto full = torch::full({scores.size(0), T, T}, kMinusInf, scores.options());
  full.slice(1, row_token[0], row_token[0] + row_step * (R - 1) + 1, row_step)
      .slice(2, col_token[0], col_token[0] + col_step * (C - 1) + 1, col_step)
      .copy_(scores);
  return match_pairs(full, torch::zeros_like(full), r);
}

}  // namespace htm::gpu
