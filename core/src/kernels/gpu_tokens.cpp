// The tokens a merge layer keeps, in one CUDA launch (kernels/gpu.h, kept_tokens.cu).
#include <string>

#include <torch/torch.h>

#include "kernels/gpu.h"
#include "kernels/kept_tokens.h"

#if HTM_CUDA_KERNELS_BUILT
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// kept_tokens.cu (nvcc): queued on `stream`; a cudaError_t.
extern "C" int htm_cuda_kept_tokens(const int64_t* src, int64_t B, int64_t T, int64_t r, int64_t* keep, void* stream);
#endif

namespace htm::gpu {

torch::Tensor kept_tokens(const torch::Tensor& src, int64_t T) {
#if HTM_CUDA_KERNELS_BUILT
  static const bool wanted = cuda_kernel_wanted("HTM_CUDA_KEPT");
  if (wanted && src.is_cuda() && src.dim() == 2 && src.scalar_type() == torch::kLong && T <= keeping::kMaxTokens &&
      src.size(1) <= T) {
    const int64_t B = src.size(0), r = src.size(1);
    const c10::cuda::CUDAGuard guard(src.device());
    const auto s = src.contiguous();
    auto keep = torch::empty({B, T - r}, s.options());
    const int error = htm_cuda_kept_tokens(s.data_ptr<int64_t>(), B, T, r, keep.data_ptr<int64_t>(),
                                           c10::cuda::getCurrentCUDAStream().stream());
    check_launch(error, "the kept tokens");
    return keep;
  }
#else
  (void)src, (void)T;
#endif
  return {};
}

torch::Tensor GpuBackend::kept_tokens(const torch::Tensor& src, int64_t T) const {
  auto keep = gpu::kept_tokens(src, T);
  return keep.defined() ? keep : Backend::kept_tokens(src, T);
}

}  // namespace htm::gpu
