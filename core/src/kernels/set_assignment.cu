// The point-set loss's exact assignment on a GPU in one launch (kernels/set_assignment.h): a block
// a sample, its N×N costs in shared memory, the layers of the dynamic programme over subsets one
// after another with a barrier between them (each thread takes the sets of the layer's size among
// its share of the 2^N masks), then the assignment traced back from the whole set. Compiled by nvcc
// where CMake finds one and a probe compiles it (core/CMakeLists.txt, HTM_CUDA_KERNELS_BUILT);
// gpu::min_cost_assignment calls it for double costs on a CUDA device, else its layers in torch
// ops. No torch header here: the caller passes the stream.
#if !defined(HTM_CUDA_EMULATION)  // the launches below: nvcc only (tests/cuda_emulation.h runs the kernels)
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "kernels/set_assignment.h"

namespace {

__global__ void assignment_kernel(const double* cost, int64_t N, int64_t* out, double* all_f, uint8_t* all_choice) {
  HTM_SHARED(shared);
  auto* c = reinterpret_cast<double*>(shared);  // N×N
  const int64_t b = blockIdx.x, sets = int64_t{1} << N;
  for (int64_t i = threadIdx.x; i < N * N; i += blockDim.x) c[i] = cost[b * N * N + i];
  double* f = all_f + b * sets;
  uint8_t* choice = all_choice + b * sets;
  if (threadIdx.x == 0) f[0] = 0;
  __syncthreads();
  for (int64_t k = 1; k <= N; ++k) {
    for (int64_t mask = threadIdx.x; mask < sets; mask += blockDim.x)
      if (htm::assignment::members(mask) == k) htm::assignment::solve_set(c, N, mask, k, f, choice);
    __syncthreads();  // layer k written (global memory, visible to the block after the barrier)
  }
  if (threadIdx.x == 0) htm::assignment::trace_back(choice, N, out + b * N);
}

}  // namespace

#if !defined(HTM_CUDA_EMULATION)
/// out (B×N int64, on the device) = each sample's least-cost assignment of predictions to targets
/// from B×N×N double costs (contiguous, prediction-major, on the device), queued on `stream` (a
/// cudaStream_t); f (B·2^N doubles) and choice (B·2^N bytes): scratch on the device. N ≤
/// htm::assignment::kMaxElements. Returns the launch's cudaError_t (0: queued).
extern "C" int htm_cuda_min_cost_assignment(const double* cost, int64_t B, int64_t N, int64_t* out, double* f,
                                            uint8_t* choice, void* stream) {
  if (B == 0 || N == 0) return 0;
  if (N > htm::assignment::kMaxElements) return static_cast<int>(cudaErrorInvalidValue);
  const int64_t sets = int64_t{1} << N;
  const int threads = sets >= 1024 ? 1024 : static_cast<int>((sets + 31) / 32 * 32);  // whole warps
  const auto on = static_cast<cudaStream_t>(stream);
  const size_t shared = static_cast<size_t>(N * N) * sizeof(double);
  assignment_kernel<<<static_cast<unsigned>(B), threads, shared, on>>>(cost, N, out, f, choice);
  return static_cast<int>(cudaGetLastError());
}
#endif
