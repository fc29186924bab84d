// The native linear layers: torch::nn::Linear's maths with forward and backward GEMMs through
// oneDNN (gemm.h), in fp32 or, under runtime.precision = "bf16", with bf16 operands; and the
// fused MLP ends (kernels/fused_linear.h) as single autograd nodes.
#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

#include <torch/torch.h>

#include "kernels/native/gemm.h"
#include "kernels/native/layer_norm.h"
#include "kernels/native/native.h"
#include "kernels/precision.h"

namespace htm {

namespace {

// A contiguous 2-D tensor (fp32 or bf16) as a GEMM operand.
Operand operand(const torch::Tensor& t) { return {t.data_ptr(), t.size(1), t.scalar_type() == torch::kBFloat16}; }

// Every row of the contiguous rows×out float y ← the bias (out floats), by pointer: what
// y.copy_(bias.expand(…)) wrote, without its expand and copy ops.
void fill_rows(torch::Tensor& y, const torch::Tensor& bias) {
  const int64_t rows = y.size(0), out = y.size(1);
  const auto b = bias.scalar_type() == torch::kFloat ? bias.contiguous() : bias.to(torch::kFloat).contiguous();
  const float* src = b.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) std::copy(src, src + out, dst + r * out);
}

// y = x Wᵀ + b over rows×in x: forward's GEMM. In bf16 (by default the precision in force), x is
// rounded once here and its bf16 copy is what backward keeps (half the memory of the fp32 one);
// the dtype of what was saved tells backward which GEMMs to run. Returns {y (rows×out), x kept,
// W kept}.
std::array<torch::Tensor, 3> linear_product(const torch::Tensor& x2, const torch::Tensor& weight,
                                            const torch::Tensor& bias,
                                            bool bf16 = matmul_precision() == Precision::bf16) {
  const int64_t rows = x2.size(0), in = weight.size(1), out = weight.size(0);
  auto x = bf16 ? bf16_copy(x2) : x2.contiguous();
  // The weight stays the fp32 parameter (no copy kept per use: the encoder's are used at every
  // depth); against a bf16 x, gemm() rounds it into a per-thread buffer, here and in backward.
  auto w = weight.contiguous();
  auto y = torch::empty({rows, out}, x2.options());
  fill_rows(y, bias);  // the GEMM adds onto the bias rows
  gemm(false, true, rows, out, in, 1.0f, operand(x), operand(w), 1.0f, y.data_ptr<float>(), out);
  return {y, x, w};
}

// g·W (rows×in), g already rounded to the input's precision.
torch::Tensor input_grad(const torch::Tensor& gb, const torch::Tensor& w) {
  const int64_t rows = gb.size(0), in = w.size(1), out = w.size(0);
  auto dx = torch::empty({rows, in}, gb.options().dtype(torch::kFloat));
  gemm(false, false, rows, in, out, 1.0f, operand(gb), operand(w), 0.0f, dx.data_ptr<float>(), in);
  return dx;
}

// Backward's GEMMs for gradient g (rows×out) given what forward kept: {dx, dW, db}, each
// undefined where not needed.
std::array<torch::Tensor, 3> linear_grads(const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w,
                                          std::array<bool, 3> needed) {
  const int64_t rows = x.size(0), in = w.size(1), out = w.size(0);
  const torch::Tensor gb = x.scalar_type() == torch::kBFloat16 ? bf16_copy(g) : g;  // rounded once for both
  std::array<torch::Tensor, 3> grads;
  if (needed[0]) grads[0] = input_grad(gb, w);
  if (needed[1]) {
    grads[1] = torch::empty({out, in}, g.options());
    gemm(true, false, out, in, rows, 1.0f, operand(gb), operand(x), 0.0f, grads[1].data_ptr<float>(), in);
  }
  if (needed[2]) grads[2] = g.sum(0);
  return grads;
}

// linear_grads' dx alone, for a caller that let the input go before: g rounded where it was bf16.
torch::Tensor linear_input_grad(const torch::Tensor& g, const torch::Tensor& w, bool bf16) {
  return input_grad(bf16 ? bf16_copy(g) : g, w);
}

// `t` with its last dimension `last` instead.
std::vector<int64_t> with_last(const torch::Tensor& t, int64_t last) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape.back() = last;
  return shape;
}

const float* data_or_null(const torch::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// layer_norm(x2) over a contiguous rows×C x2: {normalised, mean, rstd}. Narrow rows take
// layer_norm.h's kernels, wider ones torch's (and backward takes the same as forward did).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> norm_forward(const torch::Tensor& x2, const torch::Tensor& nw,
                                                                     const torch::Tensor& nb, double eps) {
  const int64_t rows = x2.size(0), C = x2.size(1);
  if (!narrow_norm(C)) return torch::native_layer_norm(x2, {C}, nw, nb, eps);
  auto out = torch::empty_like(x2), mean = torch::empty({rows}, x2.options()),
       rstd = torch::empty({rows}, x2.options());
  const auto w = nw.defined() ? nw.contiguous() : nw, b = nb.defined() ? nb.contiguous() : nb;
  layer_norm_rows(x2.data_ptr<float>(), rows, C, data_or_null(w), data_or_null(b), static_cast<float>(eps),
                  out.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>());
  return {out, mean, rstd};
}

// The norm's backward from dn (rows×C) for what was asked of x and of the norm's weight and bias
// (inputs 0, 1, 2): {dx shaped like `like` with C last, dweight, dbias}.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> norm_grads(torch::autograd::AutogradContext* ctx,
                                                                   const torch::Tensor& dn, const torch::Tensor& x,
                                                                   const torch::Tensor& mean, const torch::Tensor& rstd,
                                                                   const torch::Tensor& nw, const torch::Tensor& nb,
                                                                   const torch::Tensor& like) {
  const int64_t rows = x.size(0), C = x.size(1);
  const std::array<bool, 3> need{ctx->needs_input_grad(0), ctx->needs_input_grad(1) && nw.defined(),
                                 ctx->needs_input_grad(2) && nb.defined()};
  torch::Tensor dx, dnw, dnb;
  if (narrow_norm(C)) {
    const auto g = dn.contiguous(), w = nw.defined() ? nw.contiguous() : nw;
    if (need[0]) dx = torch::empty({rows, C}, x.options());
    if (need[1]) dnw = torch::empty({C}, x.options());
    if (need[2]) dnb = torch::empty({C}, x.options());
    layer_norm_backward_rows(g.data_ptr<float>(), x.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                             data_or_null(w), rows, C, need[0] ? dx.data_ptr<float>() : nullptr,
                             need[1] ? dnw.data_ptr<float>() : nullptr, need[2] ? dnb.data_ptr<float>() : nullptr);
  } else {
    std::tie(dx, dnw, dnb) = torch::native_layer_norm_backward(dn, x, {C}, mean, rstd, nw, nb, need);
  }
  if (dx.defined()) dx = dx.view(with_last(like, C));
  return {dx, dnw, dnb};
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const int64_t in = weight.size(1);
    auto [y, kept_x, kept_w] = linear_product(x.reshape({x.numel() / in, in}), weight, bias);
    ctx->save_for_backward({kept_x, kept_w});
    return y.view(with_last(x, weight.size(0)));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    auto g = grads[0].reshape({x.size(0), w.size(0)}).contiguous();
    auto [dx, dw, db] =
        linear_grads(g, x, w, {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)});
    if (dx.defined()) dx = dx.view(with_last(grads[0], w.size(1)));
    return {dx, dw, db};
  }
};

// linear(gelu(h)): keeps h alone, not gelu(h) too, and recomputes gelu(h) in backward (an MLP's
// widest activation stored once instead of twice).
class GeluLinearFunction : public torch::autograd::Function<GeluLinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& h,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const int64_t in = weight.size(1);
    auto h2 = h.reshape({h.numel() / in, in}).contiguous();
    auto [y, kept_a, kept_w] = linear_product(torch::gelu(h2), weight, bias);
    ctx->save_for_backward({h2, kept_w});
    ctx->saved_data["bf16"] = kept_a.scalar_type() == torch::kBFloat16;
    return y.view(with_last(h, weight.size(0)));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &h = saved[0], &w = saved[1];
    // gelu(h) is let go before the input gradient is made, which gelu's gradient then overwrites:
    // h and one activation at once (the adapter's head runs this at the step's peak).
    auto g = grads[0].reshape({h.size(0), w.size(0)}).contiguous();
    torch::Tensor dw, db, dh;
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      auto a = torch::gelu(h);
      if (ctx->saved_data["bf16"].toBool()) a = bf16_copy(a);
      const auto weights = linear_grads(g, a, w, {false, ctx->needs_input_grad(1), ctx->needs_input_grad(2)});
      dw = weights[1], db = weights[2];
    }
    if (ctx->needs_input_grad(0)) {
      dh = linear_input_grad(g, w, ctx->saved_data["bf16"].toBool());
      torch::gelu_backward_out(dh, dh, h);
      dh = dh.view(with_last(grads[0], w.size(1)));
    }
    return {dh, dw, db};
  }
};

// linear(layer_norm(x)): keeps x and the norm's statistics, not the normalised tokens too.
class NormLinearFunction : public torch::autograd::Function<NormLinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
    const int64_t C = x.size(-1);
    auto x2 = x.reshape({x.numel() / C, C}).contiguous();
    auto normed = std::get<0>(norm_forward(x2, norm_weight, norm_bias, eps));
    auto [y, kept_n, kept_w] = linear_product(normed, weight, bias);
    // The statistics come from a second, cheap pass in backward (native_layer_norm's own).
    ctx->save_for_backward({x2, norm_weight, norm_bias, kept_w});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bf16"] = kept_n.scalar_type() == torch::kBFloat16;
    return y.view(with_last(x, weight.size(0)));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &nw = saved[1], &nb = saved[2], &w = saved[3];
    const int64_t C = x.size(1);
    auto [normed, mean, rstd] = norm_forward(x, nw, nb, ctx->saved_data["eps"].toDouble());
    if (ctx->saved_data["bf16"].toBool()) normed = bf16_copy(normed);
    auto g = grads[0].reshape({x.size(0), w.size(0)}).contiguous();
    const bool to_x = ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2);
    auto [dn, dw, db] = linear_grads(g, normed, w, {to_x, ctx->needs_input_grad(3), ctx->needs_input_grad(4)});
    normed.reset();  // let go before the norm's gradient is made (this may run at the step's peak)
    torch::Tensor dx, dnw, dnb;
    if (to_x) {
      std::tie(dx, dnw, dnb) = norm_grads(ctx, dn, x, mean, rstd, nw, nb, grads[0]);
    }
    return {dx, dnw, dnb, dw, db, torch::Tensor()};
  }
};

// linear(layer_norm(x), w1, b1) and linear(layer_norm(x), w2, b2), one norm for both (a
// self-attention's queries and its keys with values): keeps x and the norm's parameters, not the
// normalised tokens the two products would keep. Backward sums the two products' gradients of the
// normalised tokens (two terms: the sum autograd makes, bit for bit) before the norm's backward.
class NormLinear2Function : public torch::autograd::Function<NormLinear2Function> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                                                const torch::Tensor& w1, const torch::Tensor& b1,
                                                const torch::Tensor& w2, const torch::Tensor& b2, double eps) {
    const int64_t C = x.size(-1);
    const bool bf16 = matmul_precision() == Precision::bf16;
    auto x2 = x.reshape({x.numel() / C, C}).contiguous();
    auto normed = std::get<0>(norm_forward(x2, norm_weight, norm_bias, eps));
    auto y1 = std::get<0>(linear_product(normed, w1, b1, bf16));
    auto y2 = std::get<0>(linear_product(normed, w2, b2, bf16));
    ctx->save_for_backward({x2, norm_weight, norm_bias, w1.contiguous(), w2.contiguous()});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bf16"] = bf16;
    return {y1.view(with_last(x, w1.size(0))), y2.view(with_last(x, w2.size(0)))};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &nw = saved[1], &nb = saved[2], &w1 = saved[3], &w2 = saved[4];
    const int64_t C = x.size(1);
    auto [normed, mean, rstd] = norm_forward(x, nw, nb, ctx->saved_data["eps"].toDouble());
    if (ctx->saved_data["bf16"].toBool()) normed = bf16_copy(normed);
    const bool to_x = ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2);
    auto g1 = grads[0].reshape({x.size(0), w1.size(0)}).contiguous();
    auto g2 = grads[1].reshape({x.size(0), w2.size(0)}).contiguous();
    auto [dn1, dw1, db1] = linear_grads(g1, normed, w1, {to_x, ctx->needs_input_grad(3), ctx->needs_input_grad(4)});
    auto [dn2, dw2, db2] = linear_grads(g2, normed, w2, {to_x, ctx->needs_input_grad(5), ctx->needs_input_grad(6)});
    normed.reset();
    torch::Tensor dx, dnw, dnb;
    if (to_x) {
      dn1.add_(dn2);
      dn2.reset();
      std::tie(dx, dnw, dnb) = norm_grads(ctx, dn1, x, mean, rstd, nw, nb, grads[0]);
    }
    return {dx, dnw, dnb, dw1, db1, dw2, db2, torch::Tensor()};
  }
};

// The whole MLP, linear(gelu(linear(layer_norm(x)))), keeping x alone (runtime.recompute =
// "mlp"): backward computes the normalised tokens, the hidden activation and its gelu again (fc1's
// GEMM once more), the values NormLinearFunction and GeluLinearFunction keep or compute, so the
// gradients are theirs bit for bit; the B×T×4C hidden activation is not held until backward.
class NormMlpFunction : public torch::autograd::Function<NormMlpFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& norm_weight, const torch::Tensor& norm_bias,
                               const torch::Tensor& w1, const torch::Tensor& b1, const torch::Tensor& w2,
                               const torch::Tensor& b2, double eps) {
    const int64_t C = x.size(-1);
    const bool bf16 = matmul_precision() == Precision::bf16;
    auto x2 = x.reshape({x.numel() / C, C}).contiguous();
    torch::Tensor a;  // gelu(h), with neither the normalised tokens nor h still held
    {
      auto h = std::get<0>(linear_product(std::get<0>(norm_forward(x2, norm_weight, norm_bias, eps)), w1, b1, bf16));
      a = torch::gelu(h);
    }
    auto y = std::get<0>(linear_product(a, w2, b2, bf16));
    ctx->save_for_backward({x2, norm_weight, norm_bias, w1.contiguous(), b1, w2.contiguous()});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bf16"] = bf16;
    return y.view(with_last(x, w2.size(0)));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &nw = saved[1], &nb = saved[2], &w1 = saved[3], &b1 = saved[4], &w2 = saved[5];
    const int64_t C = x.size(1);
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const std::array<bool, 5> need{ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2),
                                   ctx->needs_input_grad(3), ctx->needs_input_grad(4), ctx->needs_input_grad(5),
                                   ctx->needs_input_grad(6)};
    const bool to_h = need[0] || need[1] || need[2];
    // At most two activations at once: this node's backward is the first to run after the step's
    // whole forward (the adapter's head), so its own tensors add to the step's peak. h is made again
    // and the normalised tokens let go; fc2's weight gradients are taken from gelu(h), let go before
    // fc2's input gradient is made, which gelu's gradient then overwrites; the normalised tokens are
    // made once more for fc1's weight gradients (a norm is cheaper than holding them meanwhile).
    const double eps = ctx->saved_data["eps"].toDouble();
    auto h = std::get<0>(linear_product(std::get<0>(norm_forward(x, nw, nb, eps)), w1, b1, bf16));
    auto g = grads[0].reshape({x.size(0), w2.size(0)}).contiguous();
    torch::Tensor dw2, db2;
    if (need[3] || need[4]) {
      auto a = torch::gelu(h);
      if (bf16) a = bf16_copy(a);
      const auto weights = linear_grads(g, a, w2, {false, need[3], need[4]});
      dw2 = weights[1], db2 = weights[2];
    }
    torch::Tensor dx, dnw, dnb, dw1, db1;
    if (to_h) {
      auto dh = linear_input_grad(g, w2, bf16);
      torch::gelu_backward_out(dh, dh, h);
      h.reset();
      auto [normed, mean, rstd] = norm_forward(x, nw, nb, eps);
      if (need[1] || need[2]) {
        const auto weights = linear_grads(dh, bf16 ? bf16_copy(normed) : normed, w1, {false, need[1], need[2]});
        dw1 = weights[1], db1 = weights[2];
      }
      normed.reset();
      if (need[0]) {
        auto dn = linear_input_grad(dh, w1, bf16);
        dh.reset();
        std::tie(dx, dnw, dnb) = norm_grads(ctx, dn, x, mean, rstd, nw, nb, grads[0]);
      }
    }
    return {dx, dnw, dnb, dw1, db1, dw2, db2, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor bf16_copy(const torch::Tensor& x) {
  auto out = torch::empty(x.sizes(), x.options().dtype(torch::kBFloat16));
  auto* dst = reinterpret_cast<uint16_t*>(out.data_ptr());
  if (x.dim() == 3 && x.stride(2) == 1) {
    const int64_t T = x.size(1), C = x.size(2);
    for (int64_t b = 0; b < x.size(0); ++b)
      to_bf16(x.data_ptr<float>() + b * x.stride(0), T, C, x.stride(1), dst + b * T * C);
    return out;
  }
  auto src = x.contiguous();
  to_bf16(src.data_ptr<float>(), 1, src.numel(), src.numel(), dst);
  return out;
}

namespace native {

torch::Tensor NativeBackend::linear(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias) const {
  return LinearFunction::apply(x, weight, bias);
}

torch::Tensor NativeBackend::gelu_linear(const torch::Tensor& h, const torch::Tensor& weight,
                                         const torch::Tensor& bias) const {
  return GeluLinearFunction::apply(h, weight, bias);
}

torch::Tensor NativeBackend::norm_linear(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                         const torch::Tensor& norm_bias, double eps, const torch::Tensor& weight,
                                         const torch::Tensor& bias) const {
  return NormLinearFunction::apply(x, norm_weight, norm_bias, weight, bias, eps);
}

torch::Tensor NativeBackend::norm_mlp(const torch::Tensor& x, const torch::Tensor& norm_weight,
                                      const torch::Tensor& norm_bias, double eps, const torch::Tensor& w1,
                                      const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2) const {
  return NormMlpFunction::apply(x, norm_weight, norm_bias, w1, b1, w2, b2, eps);
}

std::pair<torch::Tensor, torch::Tensor> NativeBackend::norm_linear2(
    const torch::Tensor& x, const torch::Tensor& norm_weight, const torch::Tensor& norm_bias, double eps,
    const torch::Tensor& w1, const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2) const {
  auto y = NormLinear2Function::apply(x, norm_weight, norm_bias, w1, b1, w2, b2, eps);
  return {y[0], y[1]};
}

void NativeBackend::product_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) const {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const bool a16 = a.scalar_type() == torch::kBFloat16, b16 = b.scalar_type() == torch::kBFloat16;
  if (!a16 && !b16)
    return gemm(false, false, m, n, k, 1.0f, a.data_ptr<float>(), k, b.data_ptr<float>(), n, 0.0f,
                out.data_ptr<float>(), n);
  gemm(false, false, m, n, k, 1.0f, {a.data_ptr(), k, a16}, {b.data_ptr(), n, b16}, 0.0f, out.data_ptr<float>(), n);
}

}  // namespace native

}  // namespace htm
