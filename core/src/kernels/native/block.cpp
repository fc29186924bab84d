// A whole pre-norm block as one autograd node (kernels/fused_linear.h: fused_block). It calls the
// pieces the native nodes are made of (parts.h) in the order those nodes ran, one by one, forward
// and backward: the attention's norm and products (NormLinear2Function, or NormLinearFunction for
// cross-attention), the fused attention, the output product (LinearFunction), the residual sum,
// the MLP's norm and first layer (NormLinearFunction), gelu and its second layer
// (GeluLinearFunction), the residual sum. So it computes their values and gradients bit for bit,
// and keeps what they kept, with one node in the graph where they made eight and their torch ops
// between them. The block's input is passed twice, for the residual and for the norm, so that its
// two gradients reach the graph as two, in the order the nodes one by one sent them: a tensor
// with more uses sums its gradients in the same order either way.
#include <array>
#include <tuple>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "kernels/native/native.h"
#include "kernels/native/parts.h"

namespace htm {
namespace {

// The node's tensors, in this order; for cross-attention the key-value product's weight and bias
// slots hold the given keys and values instead.
enum Slot : int {
  kX,      // the block's input, for the residual sum
  kXNorm,  // the same, for the attention's norm
  kKeysOrWkv,
  kValuesOrBkv,
  kNorm1W,
  kNorm1B,
  kWq,
  kBq,
  kWo,
  kBo,
  kNorm2W,
  kNorm2B,
  kW1,
  kB1,
  kW2,
  kB2,
  kSlots
};

// What backward keeps, in this order (after it the weights it needs).
enum Kept : int {
  kX2,
  kQ,
  kK,
  kV,
  kLse,
  kA2,
  kH2,
  kU,
  kKeptN1W,
  kKeptN1B,
  kKeptWq,
  kKeptWkv,
  kKeptWo,
  kKeptN2W,
  kKeptN2B,
  kKeptW1,
  kKeptW2
};

class BlockFunction : public torch::autograd::Function<BlockFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList t, int64_t heads, double eps1,
                               double eps2, bool cross) {
    const auto& x = t[kX];
    const int64_t C = x.size(-1), rows = x.numel() / C;
    auto x2 = x.reshape({rows, C}).contiguous();
    torch::Tensor q, k, v;
    {
      const auto normed = std::get<0>(native::norm_forward(x2, t[kNorm1W], t[kNorm1B], eps1));
      q = native::linear_product(normed, t[kWq], t[kBq], false)[0].view(native::with_last(x, C));
      if (cross) {
        auto inner = [](const torch::Tensor& u) { return u.stride(2) == 1 ? u : u.contiguous(); };
        k = inner(t[kKeysOrWkv]), v = inner(t[kValuesOrBkv]);
      } else {
        const auto kv = native::linear_product(normed, t[kKeysOrWkv], t[kValuesOrBkv], false)[0];
        const auto halves = kv.view(native::with_last(x, 2 * C)).chunk(2, -1);
        k = halves[0], v = halves[1];
      }
    }
    const auto attended = native::attention_forward(q, k, v, heads, 0.0, 0, 0);
    const auto a2 = attended.out.reshape({rows, C});
    const auto h = x + native::linear_product(a2, t[kWo], t[kBo], false)[0].view(native::with_last(x, C));
    const auto h2 = h.reshape({rows, C}).contiguous();
    const auto u = native::linear_product(std::get<0>(native::norm_forward(h2, t[kNorm2W], t[kNorm2B], eps2)), t[kW1],
                                          t[kB1], false)[0];
    auto y = h + native::linear_product(torch::gelu(u), t[kW2], t[kB2], false)[0].view(native::with_last(x, C));
    ctx->save_for_backward({x2, attended.q, attended.k, attended.v, attended.lse, a2, h2, u, t[kNorm1W], t[kNorm1B],
                            t[kWq].contiguous(), cross ? torch::Tensor() : t[kKeysOrWkv].contiguous(),
                            t[kWo].contiguous(), t[kNorm2W], t[kNorm2B], t[kW1].contiguous(), t[kW2].contiguous()});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["eps1"] = eps1;
    ctx->saved_data["eps2"] = eps2;
    ctx->saved_data["cross"] = cross;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const bool cross = ctx->saved_data["cross"].toBool();
    const auto need = [&](int slot) { return ctx->needs_input_grad(slot); };
    const auto any = [&](std::initializer_list<int> slots) {
      for (int slot : slots)
        if (need(slot)) return true;
      return false;
    };
    const auto& dy = grads[0];
    const int64_t rows = s[kX2].size(0), C = s[kX2].size(1), hidden = s[kU].size(1);
    // What each of the nodes one by one was asked for: the attention's output wants a gradient
    // where its queries, keys or values do; h where that output or the output product does.
    const bool to_a = any({kXNorm, kKeysOrWkv, kValuesOrBkv, kNorm1W, kNorm1B, kWq, kBq});
    const bool to_h = need(kX) || to_a || any({kWo, kBo});
    const bool to_u = to_h || any({kNorm2W, kNorm2B, kW1, kB1});
    torch::autograd::variable_list out(kSlots + 4);

    // GeluLinearFunction: the MLP's second layer, and gelu.
    torch::Tensor du;
    {
      const auto g = dy.reshape({rows, C}).contiguous();
      if (any({kW2, kB2})) {
        const auto weights = native::linear_grads(g, torch::gelu(s[kU]), s[kKeptW2], {false, need(kW2), need(kB2)});
        out[kW2] = weights[1], out[kB2] = weights[2];
      }
      if (to_u) {
        du = native::linear_input_grad(g, s[kKeptW2], false);
        torch::gelu_backward_out(du, du, s[kU]);
      }
    }
    // NormLinearFunction: the MLP's norm and first layer; then h's two gradients summed.
    torch::Tensor dh;
    if (to_u) {
      auto [normed, mean, rstd] =
          native::norm_forward(s[kH2], s[kKeptN2W], s[kKeptN2B], ctx->saved_data["eps2"].toDouble());
      const bool to_norm = to_h || any({kNorm2W, kNorm2B});
      auto [dn, dw1, db1] =
          native::linear_grads(du.view({rows, hidden}), normed, s[kKeptW1], {to_norm, need(kW1), need(kB1)});
      out[kW1] = dw1, out[kB1] = db1;
      normed.reset();
      if (to_norm)
        std::tie(dh, out[kNorm2W], out[kNorm2B]) = native::norm_grads({to_h, need(kNorm2W), need(kNorm2B)}, dn, s[kH2],
                                                                      mean, rstd, s[kKeptN2W], s[kKeptN2B], dy);
    }
    if (to_h) dh = dh.defined() ? dy + dh : dy;
    out[kX] = need(kX) ? dh : torch::Tensor();
    // LinearFunction: the output product.
    torch::Tensor da;
    if (to_h && (to_a || any({kWo, kBo}))) {
      auto [d, dwo, dbo] =
          native::linear_grads(dh.reshape({rows, C}).contiguous(), s[kA2], s[kKeptWo], {to_a, need(kWo), need(kBo)});
      out[kWo] = dwo, out[kBo] = dbo;
      if (d.defined()) da = d.view(native::with_last(dh, C));
    }
    if (!to_a) return out;
    // FusedAttention, then the attention's norm and products.
    const auto heads = ctx->saved_data["heads"].toInt();
    auto [dq, dk, dv] = native::attention_backward(s[kQ], s[kK], s[kV], s[kLse], da, heads, 0.0, 0, 0);
    if (cross) out[kKeysOrWkv] = dk, out[kValuesOrBkv] = dv;
    if (!any({kXNorm, kNorm1W, kNorm1B, kWq, kBq}) && (cross || !any({kKeysOrWkv, kValuesOrBkv}))) return out;
    auto [normed, mean, rstd] =
        native::norm_forward(s[kX2], s[kKeptN1W], s[kKeptN1B], ctx->saved_data["eps1"].toDouble());
    const bool to_x = any({kXNorm, kNorm1W, kNorm1B});
    auto [dn, dwq, dbq] =
        native::linear_grads(dq.reshape({rows, C}).contiguous(), normed, s[kKeptWq], {to_x, need(kWq), need(kBq)});
    out[kWq] = dwq, out[kBq] = dbq;
    if (!cross) {  // SplitBackward0's cat of the halves, then NormLinear2Function's second product
      const auto dkv = torch::cat({dk, dv}, -1);
      auto [dn2, dwkv, dbkv] = native::linear_grads(dkv.reshape({rows, 2 * C}).contiguous(), normed, s[kKeptWkv],
                                                    {to_x, need(kKeysOrWkv), need(kValuesOrBkv)});
      out[kKeysOrWkv] = dwkv, out[kValuesOrBkv] = dbkv;
      if (to_x) dn.add_(dn2);
    }
    normed.reset();
    if (to_x)
      std::tie(out[kXNorm], out[kNorm1W], out[kNorm1B]) = native::norm_grads(
          {need(kXNorm), need(kNorm1W), need(kNorm1B)}, dn, s[kX2], mean, rstd, s[kKeptN1W], s[kKeptN1B], dq);
    return out;
  }
};

}  // namespace

torch::Tensor native::NativeBackend::fused_block(const torch::Tensor& x, const torch::Tensor& keys,
                                                 const torch::Tensor& values, const BlockWeights& w) const {
  if (x.size(-1) > 64) return {};
  RECORD_FUNCTION("htm::block", {});
  const bool cross = keys.defined();
  const std::array<torch::Tensor, kSlots> t{
      x,    x,    cross ? keys : w.wkv, cross ? values : w.bkv, w.norm1_weight, w.norm1_bias, w.wq, w.bq,
      w.wo, w.bo, w.norm2_weight,       w.norm2_bias,           w.w1,           w.b1,         w.w2, w.b2};
  return BlockFunction::apply(at::TensorList(t), w.heads, w.eps1, w.eps2, cross);
}

}  // namespace htm
