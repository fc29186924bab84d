// htm::Linear: torch::nn::Linear's maths and initialisation, with forward and backward GEMMs
// through oneDNN (gemm.h).
#include <atomic>
#include <cmath>

#include <torch/torch.h>

#include "sdk/gemm.h"
#include "htm/error.h"
#include "htm/layers.h"

extern "C" int dnnl_sgemm(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc);

namespace htm {

namespace {
std::atomic<int64_t> g_gemm_flops{0};
}  // namespace

int64_t gemm_flops() { return g_gemm_flops.load(std::memory_order_relaxed); }

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  g_gemm_flops.fetch_add(2 * m * n * k, std::memory_order_relaxed);
  const int status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda,
                                b, ldb, beta, c, ldc);
  if (status != 0) throw Error("oneDNN sgemm failed with status " + std::to_string(status));
}

namespace {

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / in;
    auto x2 = x.reshape({rows, in}).contiguous();
    auto w = weight.contiguous();
    auto y = torch::empty({rows, out}, x.options());
    y.copy_(bias.expand({rows, out}));  // never a view: the GEMM writes into y
    gemm(false, true, rows, out, in, 1.0f, x2.data_ptr<float>(), in, w.data_ptr<float>(), in, 1.0f,
         y.data_ptr<float>(), out);
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
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty({rows, in}, g.options());
      gemm(false, false, rows, in, out, 1.0f, g.data_ptr<float>(), out, w.data_ptr<float>(), in,
           0.0f, dx.data_ptr<float>(), in);
      std::vector<int64_t> shape = grads[0].sizes().vec();
      shape.back() = in;
      dx = dx.view(shape);
    }
    if (ctx->needs_input_grad(1)) {
      dw = torch::empty({out, in}, g.options());
      gemm(true, false, out, in, rows, 1.0f, g.data_ptr<float>(), out, x2.data_ptr<float>(), in,
           0.0f, dw.data_ptr<float>(), in);
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
