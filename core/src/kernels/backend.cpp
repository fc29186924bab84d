// The backend seam (kernels/backend.h): which backend runs an operation, and the reference
// definitions of the operations kernels/portable.cpp does not hold (the sampler's
// probabilities, the kept tokens, the set assignment, the optimiser's clipping).
#include "kernels/backend.h"

#include <limits>
#include <string>

#include <torch/torch.h>

#include "htm/error.h"
#include "htm/greedy_pairs.h"
#include "htm/row_shard.h"
#include "htm/sets.h"
#include "kernels/gpu.h"
#include "kernels/graph_draws.h"
#include "kernels/portable.h"
#if HTM_NATIVE_KERNELS
#include "kernels/native/native.h"
#endif

namespace htm {

const Backend& portable_backend() {
  static const Backend backend;
  return backend;
}

const Backend& gpu_backend() {
  static const gpu::GpuBackend backend;
  return backend;
}

const Backend& native_backend() {
#if HTM_NATIVE_KERNELS
  static const native::NativeBackend backend;
  return backend;
#else
  return portable_backend();
#endif
}

const Backend& backend_for(const at::Tensor& t) {
  switch (kernels()) {
    case Kernels::portable:
      return portable_backend();
    case Kernels::gpu:
      return gpu_backend();
    case Kernels::native:
      break;
  }
  if (!t.device().is_cpu()) return gpu_backend();
  return native_backend();
}

const char* Backend::name() const { return "portable"; }

std::pair<torch::Tensor, torch::Tensor> Backend::norm_linear2(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                                              const torch::Tensor& norm_bias, double eps,
                                                              const torch::Tensor& w1, const torch::Tensor& b1,
                                                              const torch::Tensor& w2, const torch::Tensor& b2) const {
  const auto normed = torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps);
  return {linear(normed, w1, b1), linear(normed, w2, b2)};
}

torch::Tensor Backend::norm_mlp(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                const torch::Tensor& norm_bias, double eps, const torch::Tensor& w1,
                                const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2) const {
  return gelu_linear(norm_linear(x, norm_weight, norm_bias, eps, w1, b1), w2, b2);
}

void Backend::product_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) const {
  if (a.scalar_type() == out.scalar_type() && b.scalar_type() == out.scalar_type()) {
    torch::mm_out(out, a, b);
    return;
  }
  out.copy_(torch::mm(a, b.to(a.scalar_type())));
}

torch::Tensor Backend::normal_like(const torch::Tensor& like, c10::optional<at::Generator> generator) const {
  const DrawRows d = like.dim() > 0 ? draw_rows(like.size(0)) : DrawRows{0, 0};
  auto sizes = like.sizes().vec();
  // Drawn where the generator lives (a run's generators are CPU ones) and moved to like's device.
  const auto options = like.options().device(generator.has_value() ? generator->device() : like.device());
  if (sizes.empty() || d.rows == like.size(0)) return torch::randn(like.sizes(), generator, options).to(like.device());
  sizes[0] = d.rows;
  return torch::randn(sizes, generator, options).narrow(0, d.offset, like.size(0)).contiguous().to(like.device());
}

std::pair<torch::Tensor, torch::Tensor> Backend::greedy_pairs(const torch::Tensor& logits, int64_t r) const {
  return htm::greedy_pairs(logits, r);
}

std::pair<torch::Tensor, torch::Tensor> Backend::greedy_block_pairs(const torch::Tensor& scores, int64_t r,
                                                                    const std::vector<int64_t>& row_token,
                                                                    const std::vector<int64_t>& col_token,
                                                                    int64_t T) const {
  return htm::greedy_pairs(scores, r, row_token, col_token, T);
}

torch::Tensor Backend::batched_product(const torch::Tensor& a, const torch::Tensor& b) const {
  return torch::bmm(a, b);
}

torch::Tensor Backend::pair_log_prob(const torch::Tensor& masked, const torch::Tensor& src,
                                     const torch::Tensor& dst) const {
  const int64_t B = masked.size(0), T = masked.size(1);
  // Draw k's normaliser is Σ over pairs (i, j) of unused tokens, i ≠ j, of exp(logit): with u_k
  // the unused-token indicator, u_kᵀ E u_k for E = exp(logits) with a zero diagonal — one batched
  // product, O(r·T²) per sample like the draw itself, never a B×r×T×T tensor. In double, shifted
  // by each sample's largest logit, so the later (smaller) normalisers keep their precision.
  auto top = std::get<0>(masked.detach().view({B, T * T}).max(1)).view({B, 1, 1});
  auto weights = (masked - top).to(torch::kDouble).exp();                      // B×T×T
  auto unused = portable::free_at_draw({src, dst}, T, false, torch::kDouble);  // B×r×T
  auto normaliser = (torch::bmm(unused, weights) * unused).sum(2);             // B×r
  auto chosen = masked.view({B, T * T}).gather(1, torch::add(dst, src, T));    // src·T + dst
  return chosen - (normaliser.clamp_min(1e-300).log() + top.view({B, 1})).to(masked.scalar_type());
}

torch::Tensor Backend::pair_entropy(const torch::Tensor& masked) const {
  const int64_t B = masked.size(0), T = masked.size(1);
  auto log_p = torch::log_softmax(masked.view({B, T * T}), 1);
  // 0·log 0 = 0 on the diagonal.
  return -(log_p.exp() * log_p.masked_fill(torch::isinf(log_p), 0)).sum(1);
}

torch::Tensor Backend::kept_tokens(const torch::Tensor& src, int64_t T) const {
  const int64_t B = src.size(0), r = src.size(1);
  auto order_key = torch::arange(T, src.options().dtype(torch::kLong)).expand({B, T}).clone();
  order_key.scatter_add_(1, src, torch::full({B, r}, T, src.options().dtype(torch::kLong)));
  return std::get<1>(order_key.sort(1)).narrow(1, 0, T - r);
}

torch::Tensor Backend::min_cost_assignment(const torch::Tensor& cost) const {
  const int64_t B = cost.size(0), N = cost.size(1);
  if (capturing())
    throw Error("the point-set matching of N = " + std::to_string(N) +
                " elements runs on the host (on the device: N <= " + std::to_string(gpu::kMaxDeviceAssignment) + ")");
  const auto host = cost.to(torch::kCPU, torch::kDouble).contiguous();  // host: the Hungarian algorithm
  auto index = torch::empty({B, N}, torch::kLong);
  const double* c = host.data_ptr<double>();
  int64_t* idx = index.data_ptr<int64_t>();
  HungarianWork work;  // one scratch for every sample
  for (int64_t b = 0; b < B; ++b) hungarian_into(c + b * N * N, N, work, idx + b * N);
  return index.to(cost.device());
}

void Backend::before_backward(const torch::Tensor& /*root*/) const {}

void Backend::clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) const {
  torch::nn::utils::clip_grad_norm_(params, max_norm);
}

}  // namespace htm
