// The pair sampler's greedy matching on a GPU in one launch (kernels/greedy_matching.h): a block a
// sample, its tokens' state in shared memory, the rounds of mutual best pairs run inside the
// kernel until one matches nothing (no read-back, so a CUDA graph captures it whole), then the
// r best pairs written in greedy's order. Compiled by nvcc where CMake finds one and a probe of
// this file compiles (core/CMakeLists.txt, HTM_CUDA_KERNELS_BUILT); gpu::match_pairs calls it for
// CUDA tensors, else its rounds in torch ops. No torch header here: the caller passes the stream.
#if !defined(HTM_CUDA_EMULATION)  // the launches below: nvcc only (tests/cuda_emulation.h runs the kernels)
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "kernels/greedy_matching.h"

namespace {

constexpr int kLanes = 32;  // a warp a row in the rounds

__global__ void greedy_pairs_kernel(const float* logits, const float* noise, int64_t T, int64_t r, int64_t* src,
                                    int64_t* dst, int64_t* all_ranks) {
  HTM_SHARED(shared);
  const htm::greedy::Rows rows = htm::greedy::carve(shared, T);
  const int64_t b = blockIdx.x;
  const float* L = logits + b * T * T;
  const float* N = noise + b * T * T;
  int64_t* ranks = all_ranks + b * T * T;
  for (int64_t i = threadIdx.x; i < T; i += blockDim.x) htm::greedy::start(rows, i);
  for (int64_t flat = threadIdx.x; flat < T * T; flat += blockDim.x) htm::greedy::fill_rank(L, N, T, flat, ranks);
  __syncthreads();
  const int64_t warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes, warps = blockDim.x / kLanes;
  for (;;) {
    // A warp a row: each lane's share of it, then the lanes' bests combined (the whole warp
    // takes part in every shuffle: the row, and whether it is alive, are the warp's alike).
    for (int64_t i = warp; i < T; i += warps) {
      htm::greedy::Best top;
      if (rows.alive[i]) top = htm::greedy::partial_best(ranks + i * T, T, i, lane, kLanes, rows);
      for (int offset = kLanes / 2; offset > 0; offset /= 2) {
        htm::greedy::Best other;
        other.rank = __shfl_down_sync(0xffffffffu, static_cast<long long>(top.rank), offset);
        other.at = __shfl_down_sync(0xffffffffu, top.at, offset);
        top = htm::greedy::better(top, other);
      }
      if (lane == 0) rows.best[i] = top.rank, rows.choice[i] = top.at;
    }
    __syncthreads();
    int found = 0;
    for (int64_t i = threadIdx.x; i < T; i += blockDim.x) found |= htm::greedy::take_mutual(i, rows) ? 1 : 0;
    if (!__syncthreads_or(found)) break;  // also the barrier before the next round reads `alive`
  }
  for (int64_t i = threadIdx.x; i < T; i += blockDim.x) htm::greedy::emit(T, r, i, rows, src + b * r, dst + b * r);
}

}  // namespace

#if !defined(HTM_CUDA_EMULATION)
/// src, dst (B×r int64, on the device) = the r pairs greedy takes first from B×T×T float logits
/// and noise (contiguous, on the device), queued on `stream` (a cudaStream_t); ranks: B×T×T
/// int64 of scratch on the device. T ≤ htm::greedy::kMaxTokens, r ≤ ⌊T/2⌋. Returns the
/// launch's cudaError_t (0: queued).
extern "C" int htm_cuda_greedy_pairs(const float* logits, const float* noise, int64_t B, int64_t T, int64_t r,
                                     int64_t* src, int64_t* dst, int64_t* ranks, void* stream) {
  if (B == 0 || T > htm::greedy::kMaxTokens) return B == 0 ? 0 : static_cast<int>(cudaErrorInvalidValue);
  const int threads = T >= 256 ? 256 : static_cast<int>((T + kLanes - 1) / kLanes * kLanes);  // whole warps
  const size_t shared = static_cast<size_t>(htm::greedy::rows_bytes(T));
  const auto on = static_cast<cudaStream_t>(stream);
  greedy_pairs_kernel<<<static_cast<unsigned>(B), threads, shared, on>>>(logits, noise, T, r, src, dst, ranks);
  return static_cast<int>(cudaGetLastError());
}
#endif
