// The GPU kernels' matrix products (kernels/gpu.h): linear() and the MLP's fused ends, torch's
// own products with the precision in force, whose fused forms keep less for backward and compute
// the rest again there, the gradients of the ops apart bit for bit.
#include <array>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "kernels/gpu.h"
#include "kernels/portable.h"
#include "kernels/precision.h"

namespace htm::gpu {

namespace {

bool bf16_products() { return matmul_precision() == Precision::bf16; }

}  // namespace

namespace {

// The product of linear(): a·wᵀ + b, operands in bf16 where `bf16`, the output fp32.
torch::Tensor product(const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& b, bool bf16) {
  if (!bf16) return torch::linear(a, w, b);
  const auto bias = b.defined() ? b.to(torch::kBFloat16) : b;
  return torch::linear(a.to(torch::kBFloat16), w.to(torch::kBFloat16), bias).to(torch::kFloat);
}

}  // namespace

torch::Tensor GpuBackend::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) const {
  portable::count_product(x.numel() / weight.size(1), weight.size(0), weight.size(1),
                          portable::in_training({&x, &weight}));
  return product(x, weight, bias, bf16_products());
}

namespace {

// The gradients autograd gives product() (addmm on the 2-D view: AddmmBackward0's products, the
// view's and the casts' backward), computed the same way from the same operands, so bit for bit
// the same; each only where asked.
std::array<torch::Tensor, 3> product_grads(const torch::Tensor& grad, const torch::Tensor& a, const torch::Tensor& w,
                                           bool bf16, std::array<bool, 3> asked) {
  const auto cast = [&](const torch::Tensor& t) { return bf16 ? t.to(torch::kBFloat16) : t; };
  const auto back = [&](const torch::Tensor& t) { return bf16 ? t.to(torch::kFloat) : t; };
  const auto g2 = cast(grad).reshape({-1, w.size(0)});
  std::array<torch::Tensor, 3> out;
  if (asked[0]) out[0] = back(g2.mm(cast(w)).view(a.sizes()));                           // mm_mat1_backward
  if (asked[1]) out[1] = back(g2.t().mm(cast(a).reshape({-1, w.size(1)})));              // mm_mat2_backward, wᵀ's
  if (asked[2]) out[2] = back(g2.sum(std::vector<int64_t>{0}, true).view({w.size(0)}));  // summed to b
  return out;
}

// Whether a product of `x` takes the path the two Functions below reproduce: torch::linear's addmm
// on a contiguous 2-D or 3-D input with a bias.
bool reproducible(const torch::Tensor& x, const torch::Tensor& b) {
  return b.defined() && x.is_contiguous() && (x.dim() == 2 || x.dim() == 3);
}

// Whether the activation a Function below would compute again in backward (shaped like `x`) is
// worth it: at least kRecomputeBytes in fp32. Below that the memory saved is small and the launch
// in backward is not: a small model's step (Trees at width 16, the quickstart's later layers) is
// bound by its launches, not by its memory.
constexpr int64_t kRecomputeBytes = int64_t{1} << 20;
bool worth_recomputing(int64_t values) { return values * 4 >= kRecomputeBytes; }
bool worth_recomputing(const torch::Tensor& x) { return worth_recomputing(x.numel()); }

// linear(gelu(h)), keeping h alone: gelu(h) is computed again in backward (one elementwise pass)
// instead of kept beside h, an MLP's widest activation (B×T×4C) held once instead of twice while
// the step's activations wait for backward. The gradients are the unfused path's, bit for bit.
class GeluLinear : public torch::autograd::Function<GeluLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& h,
                               const torch::Tensor& weight, const torch::Tensor& bias, bool bf16) {
    ctx->save_for_backward({h, weight});
    ctx->saved_data["bf16"] = bf16;
    return product(torch::gelu(h), weight, bias, bf16);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &h = saved[0], &weight = saved[1];
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    // gelu(h) is let go before the input's gradient is made, which gelu's gradient then
    // overwrites: h and one activation at once (the adapter's head runs this at the step's peak).
    torch::Tensor dw, db, dh;
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      const auto weights = product_grads(grads[0], torch::gelu(h), weight, bf16,
                                         {false, ctx->needs_input_grad(1), ctx->needs_input_grad(2)});
      dw = weights[1], db = weights[2];
    }
    if (ctx->needs_input_grad(0)) {
      dh = product_grads(grads[0], h, weight, bf16, {true, false, false})[0];  // h: gelu(h)'s shape
      at::gelu_backward_out(dh, dh, h);
    }
    return {dh, dw, db, torch::Tensor()};
  }
};

// linear(layer_norm(x)), keeping x and the norm's parameters: the normalised tokens (and the
// statistics) are computed again in backward instead of kept. Bit for bit the unfused path's.
class NormLinear : public torch::autograd::Function<NormLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps, bool bf16) {
    ctx->save_for_backward({x, norm_weight, norm_bias, weight});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bf16"] = bf16;
    return product(torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps), weight, bias, bf16);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &nw = saved[1], &nb = saved[2], &weight = saved[3];
    const std::vector<int64_t> shape{x.size(-1)};
    auto [normed, mean, rstd] = at::native_layer_norm(x, shape, nw, nb, ctx->saved_data["eps"].toDouble());
    const std::array<bool, 3> norm{ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    const bool to_norm = norm[0] || norm[1] || norm[2];
    auto [dn, dw, db] = product_grads(grads[0], normed, weight, ctx->saved_data["bf16"].toBool(),
                                      {to_norm, ctx->needs_input_grad(3), ctx->needs_input_grad(4)});
    normed.reset();  // let go before the norm's gradient is made (this may run at the step's peak)
    torch::Tensor dx, dnw, dnb;
    if (to_norm) std::tie(dx, dnw, dnb) = at::native_layer_norm_backward(dn, x, shape, mean, rstd, nw, nb, norm);
    return {dx, dnw, dnb, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor GpuBackend::gelu_linear(const torch::Tensor& h, const torch::Tensor& weight,
                                      const torch::Tensor& bias) const {
  if (!reproducible(h, bias) || !worth_recomputing(h) || !portable::in_training({&h, &weight, &bias}))
    return linear(torch::gelu(h), weight, bias);
  portable::count_product(h.numel() / weight.size(1), weight.size(0), weight.size(1),
                          portable::in_training({&h, &weight}));
  return GeluLinear::apply(h, weight, bias, bf16_products());
}

torch::Tensor GpuBackend::norm_linear(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                      const torch::Tensor& norm_bias, double eps, const torch::Tensor& weight,
                                      const torch::Tensor& bias) const {
  if (!reproducible(x, bias) || !worth_recomputing(x) ||
      !portable::in_training({&x, &norm_weight, &norm_bias, &weight, &bias}))
    return linear(torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps), weight, bias);
  portable::count_product(x.numel() / weight.size(1), weight.size(0), weight.size(1),
                          portable::in_training({&x, &norm_weight, &norm_bias, &weight}));
  return NormLinear::apply(x, norm_weight, norm_bias, weight, bias, eps, bf16_products());
}

namespace {

// linear(layer_norm(x), w1, b1) and linear(layer_norm(x), w2, b2), one norm for both (a
// self-attention's queries and its keys with values), keeping x and the norm's parameters: the
// normalised tokens are computed again in backward, where the two products' gradients of them are
// summed (two terms: the sum autograd makes, bit for bit) before the norm's backward.
class NormLinear2 : public torch::autograd::Function<NormLinear2> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                                                const torch::Tensor& w1, const torch::Tensor& b1,
                                                const torch::Tensor& w2, const torch::Tensor& b2, double eps,
                                                bool bf16) {
    ctx->save_for_backward({x, norm_weight, norm_bias, w1, w2});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bf16"] = bf16;
    const auto normed = torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps);
    return {product(normed, w1, b1, bf16), product(normed, w2, b2, bf16)};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &nw = saved[1], &nb = saved[2], &w1 = saved[3], &w2 = saved[4];
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const std::vector<int64_t> shape{x.size(-1)};
    auto [normed, mean, rstd] = at::native_layer_norm(x, shape, nw, nb, ctx->saved_data["eps"].toDouble());
    const std::array<bool, 3> norm{ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    const bool to_norm = norm[0] || norm[1] || norm[2];
    auto first =
        product_grads(grads[0], normed, w1, bf16, {to_norm, ctx->needs_input_grad(3), ctx->needs_input_grad(4)});
    auto second =
        product_grads(grads[1], normed, w2, bf16, {to_norm, ctx->needs_input_grad(5), ctx->needs_input_grad(6)});
    normed.reset();
    torch::Tensor dx, dnw, dnb;
    if (to_norm) {
      first[0].add_(second[0]);
      second[0].reset();
      std::tie(dx, dnw, dnb) = at::native_layer_norm_backward(first[0], x, shape, mean, rstd, nw, nb, norm);
    }
    return {dx, dnw, dnb, first[1], first[2], second[1], second[2], torch::Tensor(), torch::Tensor()};
  }
};

// linear(gelu(linear(layer_norm(x)))), the whole MLP keeping x alone (runtime.recompute = "mlp"):
// backward computes the normalised tokens, the hidden activation and its gelu again (fc1's product
// once more) and takes NormLinear's and GeluLinear's gradients from them, bit for bit. Nothing in
// it is drawn, so a CUDA graph captures it at any dropout (a block's recomputation draws masks).
class NormMlp : public torch::autograd::Function<NormMlp> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                               const torch::Tensor& w1, const torch::Tensor& b1, const torch::Tensor& w2,
                               const torch::Tensor& b2, double eps, bool bf16) {
    ctx->save_for_backward({x, norm_weight, norm_bias, w1, b1, w2});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bf16"] = bf16;
    const auto h = product(torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps), w1, b1, bf16);
    return product(torch::gelu(h), w2, b2, bf16);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &nw = saved[1], &nb = saved[2], &w1 = saved[3], &b1 = saved[4], &w2 = saved[5];
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const std::vector<int64_t> shape{x.size(-1)};
    const std::array<bool, 3> norm{ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    const bool to_norm = norm[0] || norm[1] || norm[2];
    const bool to_h = to_norm || ctx->needs_input_grad(3) || ctx->needs_input_grad(4);
    // At most two activations at once (the caching allocator reuses each at once): at the step's
    // peak these add to everything forward kept. h is made again and the normalised tokens let go;
    // fc2's weight gradients come from gelu(h), let go before fc2's input gradient is made, which
    // gelu's gradient then overwrites; the normalised tokens are made once more for fc1's weight
    // gradients (one norm, cheaper than holding them meanwhile).
    const double eps = ctx->saved_data["eps"].toDouble();
    auto h = product(std::get<0>(at::native_layer_norm(x, shape, nw, nb, eps)), w1, b1, bf16);
    torch::Tensor dw2, db2;
    if (ctx->needs_input_grad(5) || ctx->needs_input_grad(6)) {
      const auto weights = product_grads(grads[0], torch::gelu(h), w2, bf16,
                                         {false, ctx->needs_input_grad(5), ctx->needs_input_grad(6)});
      dw2 = weights[1], db2 = weights[2];
    }
    torch::Tensor dx, dnw, dnb, dw1, db1;
    if (to_h) {
      auto dh = product_grads(grads[0], h, w2, bf16, {true, false, false})[0];  // h: gelu(h)'s shape
      at::gelu_backward_out(dh, dh, h);
      h.reset();
      auto [normed, mean, rstd] = at::native_layer_norm(x, shape, nw, nb, eps);
      if (ctx->needs_input_grad(3) || ctx->needs_input_grad(4)) {
        const auto weights =
            product_grads(dh, normed, w1, bf16, {false, ctx->needs_input_grad(3), ctx->needs_input_grad(4)});
        dw1 = weights[1], db1 = weights[2];
      }
      normed.reset();
      if (to_norm) {
        auto dn = product_grads(dh, x, w1, bf16, {true, false, false})[0];  // x: the normalised tokens' shape
        dh.reset();
        std::tie(dx, dnw, dnb) = at::native_layer_norm_backward(dn, x, shape, mean, rstd, nw, nb, norm);
      }
    }
    return {dx, dnw, dnb, dw1, db1, dw2, db2, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> GpuBackend::norm_linear2(
    const torch::Tensor& x, const torch::Tensor& norm_weight, const torch::Tensor& norm_bias, double eps,
    const torch::Tensor& w1, const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2) const {
  if (!reproducible(x, b1) || !b2.defined() || !worth_recomputing(x) ||
      !portable::in_training({&x, &norm_weight, &norm_bias, &w1, &b1, &w2, &b2})) {
    const auto normed = torch::layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps);
    return {linear(normed, w1, b1), linear(normed, w2, b2)};
  }
  const int64_t rows = x.numel() / w1.size(1);
  portable::count_product(rows, w1.size(0), w1.size(1), true);
  portable::count_product(rows, w2.size(0), w2.size(1), true);
  auto y = NormLinear2::apply(x, norm_weight, norm_bias, w1, b1, w2, b2, eps, bf16_products());
  return {y[0], y[1]};
}

torch::Tensor GpuBackend::norm_mlp(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                   const torch::Tensor& norm_bias, double eps, const torch::Tensor& w1,
                                   const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2) const {
  const int64_t rows = x.numel() / w1.size(1);
  if (!reproducible(x, b1) || !b2.defined() || !worth_recomputing(rows * w1.size(0)) ||
      !portable::in_training({&x, &norm_weight, &norm_bias, &w1, &b1, &w2, &b2}))
    return gelu_linear(norm_linear(x, norm_weight, norm_bias, eps, w1, b1), w2, b2);
  portable::count_product(rows, w1.size(0), w1.size(1), true);
  portable::count_product(rows, w1.size(0), w1.size(1), false);  // fc1's product again, in backward
  portable::count_product(rows, w2.size(0), w2.size(1), true);
  return NormMlp::apply(x, norm_weight, norm_bias, w1, b1, w2, b2, eps, bf16_products());
}

}  // namespace htm::gpu
