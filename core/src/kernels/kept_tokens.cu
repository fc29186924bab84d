// The tokens a merge layer keeps on a GPU in one launch (kernels/kept_tokens.h): a block a sample,
// a flag a token in shared memory, cleared for the pairs' sources, then each kept token written at
// its place. Compiled by nvcc beside htm's other kernels (core/CMakeLists.txt,
// HTM_CUDA_KERNELS_BUILT); gpu::kept_tokens calls it for CUDA tensors, else the torch ops.
#if !defined(HTM_CUDA_EMULATION)  // the launch below: nvcc only (tests/cuda_emulation.h runs the kernel)
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "kernels/kept_tokens.h"

namespace {

__global__ void kept_kernel(const int64_t* src, int64_t T, int64_t r, int64_t* keep) {
  HTM_SHARED(shared);
  auto* flags = reinterpret_cast<int32_t*>(shared);  // T
  const int64_t b = blockIdx.x;
  for (int64_t t = threadIdx.x; t < T; t += blockDim.x) flags[t] = 1;
  __syncthreads();
  for (int64_t k = threadIdx.x; k < r; k += blockDim.x) flags[src[b * r + k]] = 0;
  __syncthreads();
  for (int64_t t = threadIdx.x; t < T; t += blockDim.x) htm::keeping::place(flags, t, keep + b * (T - r));
}

}  // namespace

#if !defined(HTM_CUDA_EMULATION)
/// keep (B×(T−r) int64, on the device): every token of T but the r sources of src (B×r int64,
/// contiguous, on the device), in increasing order, queued on `stream`. T ≤
/// htm::keeping::kMaxTokens. Returns the launch's cudaError_t (0: queued).
extern "C" int htm_cuda_kept_tokens(const int64_t* src, int64_t B, int64_t T, int64_t r, int64_t* keep, void* stream) {
  if (B == 0 || T == r) return 0;
  if (T > htm::keeping::kMaxTokens) return static_cast<int>(cudaErrorInvalidValue);
  const int threads = static_cast<int>((T + 31) / 32 * 32);
  kept_kernel<<<static_cast<unsigned>(B), threads, T * sizeof(int32_t), static_cast<cudaStream_t>(stream)>>>(src, T, r,
                                                                                                             keep);
  return static_cast<int>(cudaGetLastError());
}
#endif
