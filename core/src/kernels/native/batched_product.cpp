// torch::bmm as one autograd node on the CPU (Backend::batched_product): the same BLAS product
// per batch item that libtorch 1.13's bmm makes (its addmm_impl_cpu_ on each item, with the same
// transposes and leading dimensions), or the same plain loop below its size threshold, but
// called on pointers: torch's bmm takes three select views and a dispatched addmm per item (a
// policy's bilinear logits at batch 64: 192 views and 64 dispatches a call, again twice in
// backward). The same bits as torch::bmm, forward and backward
// (tests/batched_product_test.cpp, BatchedProduct.*; the golden digests did not move).
#include <algorithm>
#include <array>

#include <torch/torch.h>

#include "kernels/native/native.h"

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

namespace htm {
namespace {

// One batch item's matrix: its sizes and strides (elements).
struct Item {
  std::array<int64_t, 2> size, stride;
};

Item item_of(const torch::Tensor& t) { return {{t.size(1), t.size(2)}, {t.stride(1), t.stride(2)}}; }

// How addmm_impl_cpu_ (libtorch 1.13, aten/src/ATen/native/LinearAlgebra.cpp) calls the BLAS for
// result = m1·m2 with a row-major result of `m1.rows × m2.cols`: which operand goes first, the
// transposes and leading dimensions. False where it would copy an operand first (neither of its
// strides is 1 with room for the other): the caller then leaves the product to torch.
struct Call {
  bool swap = false;  // the result is read transposed: BLAS computes m2ᵀ·m1ᵀ
  char trans_a = 'N', trans_b = 'N';
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};

// How addmm_impl_cpu_ reads an operand: as it is (stride 1 at i, room for `as_is` at o) or
// transposed (stride 1 at o, room for `transposed` at i); false where it would copy it.
bool read_as(const Item& x, int i, int o, int64_t as_is, int64_t transposed, bool& transpose) {
  if (x.stride[i] == 1 && x.stride[o] >= std::max<int64_t>(1, as_is)) return transpose = false, true;
  if (x.stride[o] == 1 && x.stride[i] >= std::max<int64_t>(1, transposed)) return transpose = true, true;
  return false;
}

bool plan(Item m1, Item m2, int64_t rows, int64_t cols, Call& call) {
  const std::array<int64_t, 2> rsize{rows, cols}, rstride{cols, 1};  // the contiguous result
  bool transpose_c;
  if (rstride[0] == 1 && (rsize[1] == 1 || rstride[1] >= std::max<int64_t>(1, rsize[0])))
    transpose_c = false;
  else if (rstride[1] == 1 && (rsize[0] == 1 || rstride[0] >= std::max<int64_t>(1, rsize[1])))
    transpose_c = true, std::swap(m1, m2);
  else
    return false;
  const int64_t m = rsize[transpose_c ? 1 : 0], n = rsize[transpose_c ? 0 : 1], k = m1.size[transpose_c ? 0 : 1];
  const int i = transpose_c ? 1 : 0, o = transpose_c ? 0 : 1;
  bool transpose_a, transpose_b;
  if (!read_as(m1, i, o, m, k, transpose_a) || !read_as(m2, i, o, k, n, transpose_b)) return false;
  int64_t lda = m1.stride[transpose_a == transpose_c ? 1 : 0];
  int64_t ldb = m2.stride[transpose_b == transpose_c ? 1 : 0];
  int64_t ldc = rstride[transpose_c ? 0 : 1];
  // cpublas's normalize_last_dims
  if (n == 1) ldc = m;
  if (transpose_a) {
    if (m == 1) lda = k;
  } else if (k == 1) {
    lda = m;
  }
  if (transpose_b) {
    if (k == 1) ldb = n;
  } else if (n == 1) {
    ldb = k;
  }
  call = {transpose_c,           transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N',
          static_cast<int>(m),   static_cast<int>(n),     static_cast<int>(k),
          static_cast<int>(lda), static_cast<int>(ldb),   static_cast<int>(ldc)};
  return true;
}

// bmm's small-product loop (baddbmm_cpu_kernel, is_bmm): each entry a float sum over k in order.
void small_loop(const float* a, const float* b, float* c, int64_t batch, Item ia, Item ib, int64_t sa, int64_t sb) {
  const int64_t rows = ia.size[0], inner = ia.size[1], cols = ib.size[1];
  for (int64_t item = 0; item < batch; ++item) {
    const float *x = a + item * sa, *y = b + item * sb;
    float* out = c + item * rows * cols;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < inner; ++k)
          acc += x[i * ia.stride[0] + k * ia.stride[1]] * y[k * ib.stride[0] + j * ib.stride[1]];
        out[i * cols + j] = acc;
      }
  }
}

// a·b per item into a fresh contiguous tensor, as torch::bmm computes it; torch::bmm itself where
// it would copy an operand first.
torch::Tensor product(const torch::Tensor& a, const torch::Tensor& b) {
  const int64_t batch = a.size(0), rows = a.size(1), inner = a.size(2), cols = b.size(2);
  const Item ia = item_of(a), ib = item_of(b);
  if (batch == 0 || rows == 0 || cols == 0 || inner == 0) return torch::bmm(a, b);
  const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
  if (inner * rows * cols < 400) {
    auto c = torch::empty({batch, rows, cols}, a.options());
    small_loop(pa, pb, c.data_ptr<float>(), batch, ia, ib, a.stride(0), b.stride(0));
    return c;
  }
  Call call;
  if (!plan(ia, ib, rows, cols, call)) return torch::bmm(a, b);
  auto c = torch::empty({batch, rows, cols}, a.options());
  float* pc = c.data_ptr<float>();
  const float one = 1, zero = 0;
  for (int64_t item = 0; item < batch; ++item) {
    const float *x = pa + item * a.stride(0), *y = pb + item * b.stride(0);
    if (call.swap) std::swap(x, y);
    sgemm_(&call.trans_a, &call.trans_b, &call.m, &call.n, &call.k, &one, x, &call.lda, y, &call.ldb, &zero,
           pc + item * rows * cols, &call.ldc);
  }
  return c;
}

class BatchedProduct : public torch::autograd::Function<BatchedProduct> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return product(a, b);
  }

  // BmmBackward0's: grad·bᵀ and aᵀ·grad, each by bmm on the transposed views.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &a = saved[0], &b = saved[1];
    const auto& g = grads[0];
    torch::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = product(g, b.transpose(1, 2));
    if (ctx->needs_input_grad(1)) db = product(a.transpose(1, 2), g);
    return {da, db};
  }
};

}  // namespace

torch::Tensor native::NativeBackend::batched_product(const torch::Tensor& a, const torch::Tensor& b) const {
  const bool takes = a.dim() == 3 && b.dim() == 3 && a.device().is_cpu() && b.device().is_cpu() &&
                     a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat && a.size(0) == b.size(0) &&
                     a.size(2) == b.size(1) && !a.is_conj() && !b.is_conj();
  if (!takes) return Backend::batched_product(a, b);
  return BatchedProduct::apply(a, b);
}

}  // namespace htm
