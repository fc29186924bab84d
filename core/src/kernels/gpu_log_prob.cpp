// The pair sampler's exact log-probability and its first draw's entropy in two CUDA launches each
// (kernels/gpu.h): autograd functions over pair_log_prob.cu's forward and backward kernels. The
// log-probability keeps the logits, the pairs, the normalisers and the largest logit for backward
// (the torch ops keep the B×T×T weights in double and the B×r×T unused-token indicator besides);
// the entropy keeps the logits, two sums a sample and the largest logit.
#include <string>

#include <torch/torch.h>

#include "kernels/gpu.h"
#include "kernels/pair_log_prob.h"

#if HTM_CUDA_KERNELS_BUILT
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// pair_log_prob.cu (nvcc): each queued on `stream`; a cudaError_t.
extern "C" int htm_cuda_pair_log_prob(const float* masked, const int64_t* src, const int64_t* dst, int64_t B, int64_t T,
                                      int64_t r, float* out, double* Z, float* top, void* stream);
extern "C" int htm_cuda_pair_log_prob_backward(const float* g, const float* masked, const int64_t* src,
                                               const int64_t* dst, const double* Z, const float* top, int64_t B,
                                               int64_t T, int64_t r, float* grad, void* stream);
extern "C" int htm_cuda_pair_entropy(const float* masked, int64_t B, int64_t T, float* H, double* sums, float* top,
                                     void* stream);
extern "C" int htm_cuda_pair_entropy_backward(const float* g, const float* masked, const double* sums, const float* top,
                                              int64_t B, int64_t T, float* grad, void* stream);
#endif

namespace htm::gpu {

#if HTM_CUDA_KERNELS_BUILT
namespace {

class PairLogProb : public torch::autograd::Function<PairLogProb> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& masked,
                               const torch::Tensor& src, const torch::Tensor& dst) {
    const int64_t B = masked.size(0), T = masked.size(1), r = src.size(1);
    const c10::cuda::CUDAGuard guard(masked.device());
    auto m = masked.contiguous();
    auto s = src.contiguous(), d = dst.contiguous();
    auto out = torch::empty({B, r}, m.options());
    auto Z = torch::empty({B, r}, m.options().dtype(torch::kDouble));
    auto top = torch::empty({B}, m.options());
    check_launch(htm_cuda_pair_log_prob(m.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(), B, T, r,
                                        out.data_ptr<float>(), Z.data_ptr<double>(), top.data_ptr<float>(),
                                        c10::cuda::getCurrentCUDAStream().stream()),
                 "the exact log-probability (forward)");
    ctx->save_for_backward({m, s, d, Z, top});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &m = saved[0], &s = saved[1], &d = saved[2], &Z = saved[3], &top = saved[4];
    const int64_t B = m.size(0), T = m.size(1), r = s.size(1);
    const c10::cuda::CUDAGuard guard(m.device());
    const auto g = grads[0].to(torch::kFloat).contiguous();
    auto grad = torch::empty_like(m);
    check_launch(
        htm_cuda_pair_log_prob_backward(g.data_ptr<float>(), m.data_ptr<float>(), s.data_ptr<int64_t>(),
                                        d.data_ptr<int64_t>(), Z.data_ptr<double>(), top.data_ptr<float>(), B, T, r,
                                        grad.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream()),
        "the exact log-probability (backward)");
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

class PairEntropy : public torch::autograd::Function<PairEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& masked) {
    const int64_t B = masked.size(0), T = masked.size(1);
    const c10::cuda::CUDAGuard guard(masked.device());
    auto m = masked.contiguous();
    auto H = torch::empty({B}, m.options());
    auto sums = torch::empty({B, 2}, m.options().dtype(torch::kDouble));
    auto top = torch::empty({B}, m.options());
    check_launch(htm_cuda_pair_entropy(m.data_ptr<float>(), B, T, H.data_ptr<float>(), sums.data_ptr<double>(),
                                       top.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream()),
                 "the entropy (forward)");
    ctx->save_for_backward({m, sums, top});
    return H;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &m = saved[0], &sums = saved[1], &top = saved[2];
    const c10::cuda::CUDAGuard guard(m.device());
    const auto g = grads[0].to(torch::kFloat).contiguous();
    auto grad = torch::empty_like(m);
    check_launch(htm_cuda_pair_entropy_backward(g.data_ptr<float>(), m.data_ptr<float>(), sums.data_ptr<double>(),
                                                top.data_ptr<float>(), m.size(0), m.size(1), grad.data_ptr<float>(),
                                                c10::cuda::getCurrentCUDAStream().stream()),
                 "the entropy (backward)");
    return {grad};
  }
};

// Whether the kernels may take this call (HTM_CUDA_LOGPROB=0 keeps the torch ops).
bool kernels_wanted() {
  static const bool wanted = cuda_kernel_wanted("HTM_CUDA_LOGPROB");
  return wanted;
}

}  // namespace
#endif

torch::Tensor masked_pair_entropy(const torch::Tensor& masked) {
#if HTM_CUDA_KERNELS_BUILT
  if (kernels_wanted() && masked.is_cuda() && masked.scalar_type() == torch::kFloat && masked.dim() == 3 &&
      masked.size(1) == masked.size(2) && masked.size(1) >= 2 && masked.size(1) <= logprob::kMaxTokens)
    return PairEntropy::apply(masked);
#else
  (void)masked;
#endif
  return {};
}

torch::Tensor exact_pair_log_prob(const torch::Tensor& masked, const torch::Tensor& src, const torch::Tensor& dst) {
#if HTM_CUDA_KERNELS_BUILT
  const int64_t T = masked.dim() == 3 ? masked.size(1) : 0, r = src.dim() == 2 ? src.size(1) : 0;
  if (kernels_wanted() && masked.is_cuda() && masked.scalar_type() == torch::kFloat && masked.size(2) == T &&
      T <= logprob::kMaxTokens && r >= 1 && 2 * r <= T && src.scalar_type() == torch::kLong &&
      dst.scalar_type() == torch::kLong)
    return PairLogProb::apply(masked, src, dst);
#else
  (void)masked, (void)src, (void)dst;
#endif
  return {};
}

torch::Tensor GpuBackend::pair_log_prob(const torch::Tensor& masked, const torch::Tensor& src,
                                        const torch::Tensor& dst) const {
  auto exact = exact_pair_log_prob(masked, src, dst);
  return exact.defined() ? exact : Backend::pair_log_prob(masked, src, dst);
}

torch::Tensor GpuBackend::pair_entropy(const torch::Tensor& masked) const {
  auto entropy = masked_pair_entropy(masked);
  return entropy.defined() ? entropy : Backend::pair_entropy(masked);
}

}  // namespace htm::gpu
