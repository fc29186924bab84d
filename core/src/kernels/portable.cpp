// The portable backend (kernels/backend.h, kernels/portable.h): plain torch ops on any device.
#include "kernels/portable.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "htm/row_shard.h"
#include "kernels/backend.h"
#include "kernels/graph_draws.h"
#include "kernels/precision.h"

namespace htm::portable {

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// An operand of a matrix product as the precision in force has it.
torch::Tensor operand(const torch::Tensor& t) { return matmul_precision() == Precision::bf16 ? round_bf16(t) : t; }

// SplitMix64 (kernels/counter_rng.h) on int64 tensors: the products wrap modulo 2⁶⁴ as the
// unsigned ones do, and a logical right shift is an arithmetic one with the sign bits masked.
torch::Tensor shift_right(const torch::Tensor& x, int s) {
  return torch::bitwise_right_shift(x, s) & ((int64_t{1} << (64 - s)) - 1);
}

int64_t bits_of(uint64_t u) { return static_cast<int64_t>(u); }

torch::Tensor splitmix64(torch::Tensor x) {
  x = x + bits_of(0x9e3779b97f4a7c15ULL);
  x = (x ^ shift_right(x, 30)) * bits_of(0xbf58476d1ce4e5b9ULL);
  x = (x ^ shift_right(x, 27)) * bits_of(0x94d049bb133111ebULL);
  return x ^ shift_right(x, 31);
}

torch::Tensor counter_bits(uint64_t seed, const torch::Tensor& n) {
  return splitmix64((n * bits_of(0xd1b54a32d192ed03ULL)) ^ bits_of(seed));
}

// 0 or 1/(1−p) from 16-bit draws.
torch::Tensor keep(const torch::Tensor& draws, double p) {
  const int64_t threshold = std::lround(p * 65536.0);
  return (draws >= threshold).to(torch::kFloat) * static_cast<float>(1.0 / (1.0 - p));
}

}  // namespace

torch::Tensor free_at_draw(std::initializer_list<torch::Tensor> drawn, int64_t T, bool taken, torch::ScalarType dtype) {
  const torch::Tensor& first = *drawn.begin();
  const int64_t B = first.size(0), r = first.size(1);
  auto taken_at = torch::full({B, T}, r, first.options());
  const auto order = device_constant("draw order", r, first.device(),
                                     [&] { return torch::arange(r, first.options().dtype(torch::kLong)); });
  for (const auto& index : drawn) taken_at.scatter_(1, index, order.expand({B, r}));
  auto out = torch::empty({B, r, T}, first.options().dtype(dtype));
  return taken ? at::lt_out(out, taken_at.unsqueeze(1), order.view({1, r, 1}))
               : at::ge_out(out, taken_at.unsqueeze(1), order.view({1, r, 1}));
}

void count_product(int64_t m, int64_t n, int64_t k, bool backward) { count_gemm_flops((backward ? 6 : 2) * m * n * k); }

bool in_training(std::initializer_list<const torch::Tensor*> inputs) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

torch::Tensor round_bf16(const torch::Tensor& x) { return x.to(torch::kBFloat16).to(torch::kFloat); }

torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t seed, int64_t first, const at::Device& device) {
  auto e = torch::arange(c10::multiply_integers(sizes), torch::TensorOptions(torch::kLong).device(device)) + first;
  // Lanes of 16 bits: an arithmetic shift by at most 48 leaves the low 16 bits as a logical one would.
  auto draws = torch::bitwise_right_shift(counter_bits(seed, e.div(4, "floor")), e.remainder(4) * 16);
  return keep(draws & 0xffff, p).view(sizes);
}

torch::Tensor attention_mask(int64_t rows, int64_t cols, double p, uint64_t seed, int64_t first,
                             const at::Device& device) {
  const auto longs = torch::TensorOptions(torch::kLong).device(device);
  auto base = counter_bits(seed, torch::arange(rows, longs) + first);                    // rows
  auto bits = splitmix64(base.unsqueeze(1) + torch::arange((cols + 3) / 4, longs) * 4);  // rows×words: entry 4w
  auto draws = torch::bitwise_right_shift(bits.unsqueeze(2), torch::arange(4, longs) * 16) & 0xffff;  // rows×words×4
  return keep(draws.view({rows, -1}).narrow(1, 0, cols), p);
}

void take_pairs(const torch::Tensor& flat, int64_t k, torch::Tensor& src, torch::Tensor& dst, torch::Tensor& used) {
  const int64_t T = used.size(1);
  auto i = flat.div(T, "floor"), j = flat.remainder(T);
  src.select(1, k).copy_(i);
  dst.select(1, k).copy_(j);
  used.scatter_(1, i.unsqueeze(1), true);
  used.scatter_(1, j.unsqueeze(1), true);
}

std::pair<torch::Tensor, torch::Tensor> greedy_pairs(const torch::Tensor& logits, const torch::Tensor& noise,
                                                     int64_t r) {
  const int64_t B = logits.size(0), T = logits.size(1);
  const auto bools = logits.options().dtype(torch::kBool);
  const auto diagonal = torch::eye(T, bools).unsqueeze(0);
  // A sample whose allowed pairs all have probability 0 draws among them uniformly (as native).
  auto keys = logits + noise;
  auto used = torch::zeros({B, T}, bools);
  auto src = torch::empty({B, r}, logits.options().dtype(torch::kLong)), dst = torch::empty_like(src);
  for (int64_t k = 0; k < r; ++k) {
    auto blocked = used.unsqueeze(2).logical_or(used.unsqueeze(1)).logical_or(diagonal);
    auto allowed = keys.masked_fill(blocked, kMinusInf).view({B, T * T});
    auto uniform = noise.masked_fill(blocked, kMinusInf).view({B, T * T});
    auto none = std::get<0>(allowed.max(1, /*keepdim=*/true)) == kMinusInf;
    auto flat = torch::where(none, uniform, allowed).argmax(1);
    take_pairs(flat, k, src, dst, used);
  }
  return {src, dst};
}

}  // namespace htm::portable

namespace htm {

torch::Tensor Backend::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
  portable::count_product(x.numel() / weight.size(1), weight.size(0), weight.size(1),
                          portable::in_training({&x, &weight}));
  return torch::linear(portable::operand(x), portable::operand(weight), bias);
}

torch::Tensor Backend::gelu_linear(const torch::Tensor& h, const torch::Tensor& weight,
                                   const torch::Tensor& bias) const {
  return linear(torch::gelu(h), weight, bias);
}

torch::Tensor Backend::norm_linear(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                   const torch::Tensor& norm_bias, double eps, const torch::Tensor& weight,
                                   const torch::Tensor& bias) const {
  return linear(torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps), weight, bias);
}

torch::Tensor Backend::fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       int64_t heads, double p, uint64_t seed, int64_t first) const {
  const int64_t B = k.size(0), Tq = q.size(1), Tk = k.size(1), C = q.size(2), d = C / heads;
  auto split = [&](const torch::Tensor& t) {  // b×n×C → b×h×n×d
    return portable::operand(t).view({t.size(0), t.size(1), heads, d}).transpose(1, 2);
  };
  const bool backward = portable::in_training({&q, &k, &v});
  portable::count_product(B * heads * Tq, Tk, d, backward);  // the scores
  portable::count_product(B * heads * Tq, d, Tk, backward);  // the weighted values
  auto weights = torch::softmax(torch::matmul(split(q), split(k).transpose(-2, -1)) / std::sqrt(double(d)), -1);
  if (p > 0)
    weights = weights * portable::attention_mask(B * heads * Tq, Tk, p, seed, first, q.device()).view(weights.sizes());
  auto out = torch::matmul(portable::operand(weights), split(v));  // B×h×Tq×d
  return out.transpose(1, 2).reshape({B, Tq, C});
}

torch::Tensor Backend::dropout(const torch::Tensor& x, double p, uint64_t seed, int64_t first) const {
  return x * portable::dropout_mask(x.sizes(), p, seed, first, x.device());
}

torch::Tensor Backend::gumbel_like(const torch::Tensor& like, at::Generator generator) const {
  const DrawRows d = like.dim() > 0 ? draw_rows(like.size(0)) : DrawRows{0, 0};
  auto sizes = like.sizes().vec();
  if (!sizes.empty()) sizes[0] = d.rows;
  auto e =
      torch::empty(sizes, torch::TensorOptions(torch::kFloat).device(generator.device())).exponential_(1.0, generator);
  if (!sizes.empty() && d.rows != like.size(0)) e = e.narrow(0, d.offset, like.size(0));
  return (-e.log_()).to(like.device());
}

std::pair<torch::Tensor, torch::Tensor> Backend::sample_disjoint_pairs(const torch::Tensor& logits, int64_t r,
                                                                       at::Generator generator) const {
  return portable::greedy_pairs(logits, gumbel_like(logits, generator), r);
}

void Backend::adamw_update(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& exp_avg,
                           std::vector<torch::Tensor>& exp_avg_sq, const std::vector<torch::Tensor>& grads,
                           const AdamWStep& s) const {
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].mul_(s.decay);
    exp_avg[k].mul_(s.beta1).add_(grads[k], s.rest1);
    exp_avg_sq[k].mul_(s.beta2).addcmul_(grads[k], grads[k], s.rest2);
    params[k].addcdiv_(exp_avg[k], exp_avg_sq[k].sqrt().div_(s.root_bias2).add_(s.eps), -s.step_size);
  }
}

}  // namespace htm
