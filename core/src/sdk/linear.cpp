// htm::Linear: torch::nn::Linear's maths and initialisation, with forward and backward GEMMs
// through oneDNN (gemm.h), in fp32 or, under runtime.precision = "bf16", with bf16 operands.
#include <cmath>

#include <torch/torch.h>

#include "sdk/gemm.h"
#include "htm/error.h"
#include "htm/layers.h"
#include "htm/precision.h"

namespace htm {

namespace {

// A 2-D fp32 tensor's bf16 copy (round to nearest even), contiguous.
torch::Tensor bf16_copy(const torch::Tensor& x) {
  auto src = x.contiguous();
  auto out = torch::empty(src.sizes(), src.options().dtype(torch::kBFloat16));
  to_bf16(src.data_ptr<float>(), 1, src.numel(), src.numel(), reinterpret_cast<uint16_t*>(out.data_ptr()));
  return out;
}

// A contiguous 2-D tensor (fp32 or bf16) as a GEMM operand.
Operand operand(const torch::Tensor& t) {
  return {t.data_ptr(), t.size(1), t.scalar_type() == torch::kBFloat16};
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / in;
    // In bf16 the operands are rounded once here, and backward keeps the bf16 copies (half the
    // memory of the fp32 ones); the dtype of what was saved tells backward which GEMMs to run.
    const bool bf16 = matmul_precision() == Precision::bf16;
    auto x2 = bf16 ? bf16_copy(x.reshape({rows, in})) : x.reshape({rows, in}).contiguous();
    auto w = bf16 ? bf16_copy(weight) : weight.contiguous();
    auto y = torch::empty({rows, out}, x.options());
    y.copy_(bias.expand({rows, out}));  // never a view: the GEMM writes into y
    gemm(false, true, rows, out, in, 1.0f, operand(x2), operand(w), 1.0f, y.data_ptr<float>(), out);
    ctx->save_for_backward({x2, w});
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = out;
    return y.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &w = saved[1];
    const int64_t rows = x2.size(0), in = w.size(1), out = w.size(0);
    auto g = grads[0].reshape({rows, out}).contiguous();
    const bool bf16 = x2.scalar_type() == torch::kBFloat16;
    const torch::Tensor gb = bf16 ? bf16_copy(g) : g;  // rounded once for both GEMMs
    const Operand go = operand(gb);
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty({rows, in}, g.options());
      gemm(false, false, rows, in, out, 1.0f, go, operand(w), 0.0f, dx.data_ptr<float>(), in);
      std::vector<int64_t> shape = grads[0].sizes().vec();
      shape.back() = in;
      dx = dx.view(shape);
    }
    if (ctx->needs_input_grad(1)) {
      dw = torch::empty({out, in}, g.options());
      gemm(true, false, out, in, rows, 1.0f, go, operand(x2), 0.0f, dw.data_ptr<float>(), in);
    }
    if (ctx->needs_input_grad(2)) db = g.sum(0);
    return {dx, dw, db};
  }
};

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (x.scalar_type() != torch::kFloat || x.size(-1) != weight.size(1))
    return torch::linear(x, weight, bias);  // not ours to speed up: torch's own path
  // Function::apply cannot take an undefined tensor: a missing bias is a constant zero.
  return LinearFunction::apply(x, weight, bias.defined() ? bias : torch::zeros({weight.size(0)}, weight.options()));
}

LinearImpl::LinearImpl(int64_t in, int64_t out, bool bias) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // as torch::nn::Linear
  weight = register_parameter("weight", torch::empty({out, in}).uniform_(-bound, bound));
  if (bias) this->bias = register_parameter("bias", torch::empty({out}).uniform_(-bound, bound));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) { return linear(x, weight, bias); }

}  // namespace htm
