// The kernels and precision in force (kernels/kernels.h), and the SDK's entry points
// (htm/layers.h, kernels/fused_linear.h): each checks what it takes, works out what every backend
// needs alike (a missing bias, the dropout seed, a data-parallel process's first row) once, and
// hands the call to backend_for(its tensor) (kernels/backend.h).
#include "kernels/kernels.h"

#include <atomic>
#include <cmath>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "htm/layers.h"
#include "htm/row_shard.h"
#include "kernels/backend.h"
#include "kernels/fused_linear.h"
#include "kernels/graph_draws.h"
#include "kernels/portable.h"
#include "kernels/precision.h"
#if HTM_NATIVE_KERNELS
#include "kernels/native/gemm.h"
#endif

namespace htm {

namespace {

std::atomic<Kernels> g_kernels{HTM_NATIVE_KERNELS ? Kernels::native : Kernels::portable};
std::atomic<Precision> g_precision{Precision::fp32};
std::atomic<int64_t> g_gemm_flops{0};
std::atomic<bool> g_recompute_mlps{false};

// A missing bias is a constant zero: Function::apply cannot take an undefined tensor.
torch::Tensor bias_or_zeros(const torch::Tensor& bias, const torch::Tensor& weight) {
  return bias.defined() ? bias : torch::zeros({weight.size(0)}, weight.options());
}

// A dropout mask's stream, from torch's global CPU generator (so torch::manual_seed fixes it).
uint64_t next_dropout_seed() { return next_seed(at::detail::getDefaultCPUGenerator()); }

bool ours(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.scalar_type() == torch::kFloat && x.size(-1) == weight.size(1);
}

}  // namespace

Kernels kernels() { return g_kernels.load(std::memory_order_relaxed); }

void set_kernels(Kernels kernels) { g_kernels.store(kernels, std::memory_order_relaxed); }

bool native_kernels_built() { return HTM_NATIVE_KERNELS != 0; }

std::string kernels_name(Kernels kernels) {
  switch (kernels) {
    case Kernels::native:
      return "native";
    case Kernels::portable:
      return "portable";
    case Kernels::gpu:
      return "gpu";
  }
  return "?";
}

void count_gemm_flops(int64_t flops) { g_gemm_flops.fetch_add(flops, std::memory_order_relaxed); }
int64_t gemm_flops() { return g_gemm_flops.load(std::memory_order_relaxed); }

Precision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }
void set_matmul_precision(Precision precision) { g_precision.store(precision, std::memory_order_relaxed); }

bool cpu_has_bf16() { return bf16_hardware() != "none"; }

std::string bf16_hardware() {
#if HTM_NATIVE_KERNELS
  return native_bf16_hardware();
#else
  return "none";
#endif
}

// ---------------------------------------------------------------------------------------------
// Entry points

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!ours(x, weight)) return torch::linear(x, weight, bias);  // not ours to speed up: torch's own path
  return backend_for(x).linear(x, weight, bias_or_zeros(bias, weight));
}

torch::Tensor gelu_linear(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!ours(h, weight)) return torch::linear(torch::gelu(h), weight, bias);
  return backend_for(h).gelu_linear(h, weight, bias_or_zeros(bias, weight));
}

torch::Tensor norm_linear(const torch::Tensor& x, const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                          double eps, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!ours(x, weight) || !norm_weight.defined() || !norm_bias.defined())
    return linear(torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps), weight, bias);
  return backend_for(x).norm_linear(x, norm_weight, norm_bias, eps, weight, bias_or_zeros(bias, weight));
}

std::pair<torch::Tensor, torch::Tensor> norm_linear2(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                                     const torch::Tensor& norm_bias, double eps,
                                                     const torch::Tensor& w1, const torch::Tensor& b1,
                                                     const torch::Tensor& w2, const torch::Tensor& b2) {
  const bool fused = ours(x, w1) && ours(x, w2) && norm_weight.defined() && norm_bias.defined();
  if (fused)
    return backend_for(x).norm_linear2(x, norm_weight, norm_bias, eps, w1, bias_or_zeros(b1, w1), w2,
                                       bias_or_zeros(b2, w2));
  const auto normed = torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps);
  return {linear(normed, w1, b1), linear(normed, w2, b2)};
}

bool recompute_mlps() { return g_recompute_mlps.load(std::memory_order_relaxed); }
void set_recompute_mlps(bool on) { g_recompute_mlps.store(on, std::memory_order_relaxed); }

torch::Tensor norm_mlp(const torch::Tensor& x, const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                       double eps, const torch::Tensor& w1, const torch::Tensor& b1, const torch::Tensor& w2,
                       const torch::Tensor& b2) {
  const bool fused = recompute_mlps() && ours(x, w1) && w2.size(1) == w1.size(0) && norm_weight.defined() &&
                     norm_bias.defined() && portable::in_training({&x, &norm_weight, &norm_bias, &w1, &b1, &w2, &b2});
  if (fused)
    return backend_for(x).norm_mlp(x, norm_weight, norm_bias, eps, w1, bias_or_zeros(b1, w1), w2,
                                   bias_or_zeros(b2, w2));
  return gelu_linear(norm_linear(x, norm_weight, norm_bias, eps, w1, b1), w2, b2);
}

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t heads,
                              double dropout, bool training) {
  RECORD_FUNCTION("htm::attention", {});  // its own scope in a profile and a memory census
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "fused_attention: q, k, v must be 3-D");
  TORCH_CHECK(q.scalar_type() == torch::kFloat && k.scalar_type() == torch::kFloat && v.scalar_type() == torch::kFloat,
              "fused_attention: float tensors only");
  TORCH_CHECK(q.size(0) == k.size(0) || q.size(0) == 1, "fused_attention: query batch must be 1 or B");
  TORCH_CHECK(k.sizes() == v.sizes() && q.size(2) == k.size(2) && q.size(2) % heads == 0,
              "fused_attention: inconsistent shapes");
  auto inner = [](const torch::Tensor& t) { return t.stride(2) == 1 ? t : t.contiguous(); };
  const double p = training ? dropout : 0.0;
  const uint64_t seed = p > 0 ? next_dropout_seed() : 0;
  // A data-parallel process's rows sit at this row of the whole batch's mask (row_shard.h).
  const int64_t first = p > 0 ? draw_rows(k.size(0)).offset * heads * q.size(1) : 0;
  return backend_for(q).fused_attention(inner(q), inner(k), inner(v), heads, p, seed, first);
}

torch::Tensor fast_dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (p >= 1) return torch::zeros_like(x);
  const uint64_t seed = next_dropout_seed();
  const DrawRows rows = x.dim() > 0 ? draw_rows(x.size(0)) : DrawRows{0, 0};
  const int64_t first = x.dim() > 0 && x.size(0) > 0 ? rows.offset * (x.numel() / x.size(0)) : 0;
  return backend_for(x).dropout(x, p, seed, first);
}

void adamw_update(torch::Tensor& param, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq, const torch::Tensor& grad,
                  const AdamWStep& step) {
  std::vector<torch::Tensor> p{param}, m{exp_avg}, v{exp_avg_sq};
  backend_for(param).adamw_update(p, m, v, {grad}, step);
}

void adamw_update(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& exp_avg,
                  std::vector<torch::Tensor>& exp_avg_sq, const std::vector<torch::Tensor>& grads,
                  const AdamWStep& step) {
  if (params.empty()) return;
  backend_for(params.front()).adamw_update(params, exp_avg, exp_avg_sq, grads, step);
}

}  // namespace htm
