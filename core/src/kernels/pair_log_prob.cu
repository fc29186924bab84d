// The pair sampler's exact log-probability and its first draw's entropy on a GPU
// (kernels/pair_log_prob.h), forward and backward in one launch each: a block a sample, which draw took each token in
// shared memory; forward, the largest logit (a block's reduction), the level sums (a warp a draw, the never-taken
// tokens' pairs by the block) and their suffix sums, then each draw's log-probability; backward, the prefix sums of
// g/Z, then the gradient an element. Every sum in a fixed order: the same bits twice. Compiled by nvcc beside htm's
// other kernels (core/CMakeLists.txt, HTM_CUDA_KERNELS_BUILT); gpu::exact_pair_log_prob calls them for CUDA tensors,
// else the torch ops. No torch header here: the caller passes the stream.
#if !defined(HTM_CUDA_EMULATION)  // the launches below: nvcc only (tests/cuda_emulation.h runs the kernels)
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "kernels/pair_log_prob.h"

namespace {

constexpr int kLanes = 32;

// A warp's sum of v, in lane 0 (the same order every time).
__device__ double warp_sum(double v) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ void mark_all(const int64_t* s, const int64_t* d, int64_t T, int64_t r, int32_t* taken) {
  for (int64_t u = threadIdx.x; u < T; u += blockDim.x) taken[u] = static_cast<int32_t>(r);
  __syncthreads();
  for (int64_t k = threadIdx.x; k < r; k += blockDim.x) htm::logprob::mark_taken(s, d, k, taken);
  __syncthreads();
}

// Every thread's v combined by the block, in every thread: a tree in a fixed order (blockDim.x a
// power of two). reduce: blockDim.x slots, free again on return.
template <class Combine>
__device__ double block_reduce(double v, double* reduce, Combine combine) {
  reduce[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) reduce[threadIdx.x] = combine(reduce[threadIdx.x], reduce[threadIdx.x + half]);
    __syncthreads();
  }
  v = reduce[0];
  __syncthreads();
  return v;
}

struct Sum {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Larger {  // floats kept in doubles (exactly): max is exact in any order, and a NaN wins
  __device__ double operator()(double a, double b) const {
    return htm::logprob::larger(static_cast<float>(a), static_cast<float>(b));
  }
};

// The largest logit of a sample, in every thread.
__device__ float block_top(const float* m, int64_t T, double* reduce) {
  float t = -INFINITY;
  for (int64_t flat = threadIdx.x; flat < T * T; flat += blockDim.x) t = htm::logprob::larger(t, m[flat]);
  return static_cast<float>(block_reduce(t, reduce, Larger()));
}

__global__ void entropy_kernel(const float* masked, int64_t T, float* H, double* sums, float* top) {
  HTM_SHARED(shared);
  auto* reduce = reinterpret_cast<double*>(shared);  // blockDim.x slots
  const int64_t b = blockIdx.x;
  const float* m = masked + b * T * T;
  const float t = block_top(m, T, reduce);
  const htm::logprob::Sums mine = htm::logprob::entropy_partial(m, T, t, threadIdx.x, blockDim.x);
  const double z = block_reduce(mine.z, reduce, Sum()), a = block_reduce(mine.a, reduce, Sum());
  if (threadIdx.x == 0) {
    sums[2 * b] = z, sums[2 * b + 1] = a, top[b] = t;
    H[b] = static_cast<float>(htm::logprob::entropy_of(z, a));
  }
}

__global__ void entropy_backward_kernel(const float* g, const float* masked, const double* sums, const float* top,
                                        int64_t T, float* grad) {
  const int64_t b = blockIdx.x;
  for (int64_t flat = threadIdx.x; flat < T * T; flat += blockDim.x)
    grad[b * T * T + flat] =
        htm::logprob::entropy_spread(masked + b * T * T, T, top[b], sums[2 * b], sums[2 * b + 1], g[b], flat);
}

__global__ void forward_kernel(const float* masked, const int64_t* src, const int64_t* dst, int64_t T, int64_t r,
                               float* out, double* Z, float* top) {
  HTM_SHARED(shared);
  double* reduce = reinterpret_cast<double*>(shared);   // blockDim.x slots
  double* H = reduce + blockDim.x;                      // r + 1
  auto* taken = reinterpret_cast<int32_t*>(H + r + 1);  // T
  const int64_t b = blockIdx.x;
  const float* m = masked + b * T * T;
  const int64_t *s = src + b * r, *d = dst + b * r;
  const float t = block_top(m, T, reduce);
  mark_all(s, d, T, r, taken);
  // H[l] for l < r: a warp a draw.
  const int64_t warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes, warps = blockDim.x / kLanes;
  for (int64_t l = warp; l < r; l += warps) {
    const double sum = warp_sum(htm::logprob::level_partial(m, T, t, taken, s[l], d[l], l, lane, kLanes));
    if (lane == 0) H[l] = sum;
  }
  // H[r]: the block's (its barriers also publish the warps' H[l]).
  const double rest =
      block_reduce(htm::logprob::rest_partial(m, T, t, taken, r, threadIdx.x, blockDim.x), reduce, Sum());
  if (threadIdx.x == 0) {
    H[r] = rest;
    htm::logprob::suffix_sums(H, r);
    top[b] = t;
  }
  __syncthreads();
  for (int64_t k = threadIdx.x; k < r; k += blockDim.x) {
    Z[b * r + k] = H[k];
    out[b * r + k] = htm::logprob::log_prob(m[s[k] * T + d[k]], H[k], t);
  }
}

__global__ void backward_kernel(const float* g, const float* masked, const int64_t* src, const int64_t* dst,
                                const double* Z, const float* top, int64_t T, int64_t r, float* grad) {
  HTM_SHARED(shared);
  double* S = reinterpret_cast<double*>(shared);        // r + 1
  auto* taken = reinterpret_cast<int32_t*>(S + r + 1);  // T
  const int64_t b = blockIdx.x;
  const float* m = masked + b * T * T;
  const int64_t *s = src + b * r, *d = dst + b * r;
  if (threadIdx.x == 0) htm::logprob::prefix_sums(g + b * r, Z + b * r, r, S);
  mark_all(s, d, T, r, taken);  // its barriers also publish S
  float* out = grad + b * T * T;
  for (int64_t flat = threadIdx.x; flat < T * T; flat += blockDim.x)
    out[flat] = htm::logprob::spread(m, T, top[b], taken, S, flat);
  __syncthreads();
  for (int64_t k = threadIdx.x; k < r; k += blockDim.x) out[s[k] * T + d[k]] += g[b * r + k];
}

int threads_for(int64_t T) {
  int threads = kLanes;
  while (threads < 256 && threads < T * T) threads *= 2;  // a power of two, whole warps
  return threads;
}

}  // namespace

#if !defined(HTM_CUDA_EMULATION)
/// out, Z (B×r float and double) and top (B float), on the device, from B×T×T float logits with
/// the diagonal at −∞ and B×r int64 pairs (contiguous, on the device), queued on `stream`.
/// T ≤ htm::logprob::kMaxTokens, 1 ≤ r ≤ ⌊T/2⌋. Returns the launch's cudaError_t (0: queued).
extern "C" int htm_cuda_pair_log_prob(const float* masked, const int64_t* src, const int64_t* dst, int64_t B, int64_t T,
                                      int64_t r, float* out, double* Z, float* top, void* stream) {
  if (B == 0) return 0;
  if (T > htm::logprob::kMaxTokens || r < 1 || 2 * r > T) return static_cast<int>(cudaErrorInvalidValue);
  const int threads = threads_for(T);
  const size_t shared = (threads + r + 1) * sizeof(double) + T * sizeof(int32_t);
  forward_kernel<<<static_cast<unsigned>(B), threads, shared, static_cast<cudaStream_t>(stream)>>>(masked, src, dst, T,
                                                                                                   r, out, Z, top);
  return static_cast<int>(cudaGetLastError());
}

/// grad (B×T×T float, on the device) of Σ g·log p from g (B×r) and the forward's inputs, Z and top.
extern "C" int htm_cuda_pair_log_prob_backward(const float* g, const float* masked, const int64_t* src,
                                               const int64_t* dst, const double* Z, const float* top, int64_t B,
                                               int64_t T, int64_t r, float* grad, void* stream) {
  if (B == 0) return 0;
  if (T > htm::logprob::kMaxTokens || r < 1 || 2 * r > T) return static_cast<int>(cudaErrorInvalidValue);
  const size_t shared = (r + 1) * sizeof(double) + T * sizeof(int32_t);
  backward_kernel<<<static_cast<unsigned>(B), threads_for(T), shared, static_cast<cudaStream_t>(stream)>>>(
      g, masked, src, dst, Z, top, T, r, grad);
  return static_cast<int>(cudaGetLastError());
}

/// H (B float), sums (B×2 double) and top (B float), on the device: the entropy of the first draw's
/// distribution from B×T×T float logits with the diagonal at −∞, queued on `stream`.
extern "C" int htm_cuda_pair_entropy(const float* masked, int64_t B, int64_t T, float* H, double* sums, float* top,
                                     void* stream) {
  if (B == 0) return 0;
  if (T < 2 || T > htm::logprob::kMaxTokens) return static_cast<int>(cudaErrorInvalidValue);
  const int threads = threads_for(T);
  entropy_kernel<<<static_cast<unsigned>(B), threads, threads * sizeof(double), static_cast<cudaStream_t>(stream)>>>(
      masked, T, H, sums, top);
  return static_cast<int>(cudaGetLastError());
}

/// grad (B×T×T float, on the device) of Σ g·H from g (B) and the forward's sums and top.
extern "C" int htm_cuda_pair_entropy_backward(const float* g, const float* masked, const double* sums, const float* top,
                                              int64_t B, int64_t T, float* grad, void* stream) {
  if (B == 0) return 0;
  if (T < 2 || T > htm::logprob::kMaxTokens) return static_cast<int>(cudaErrorInvalidValue);
  entropy_backward_kernel<<<static_cast<unsigned>(B), threads_for(T), 0, static_cast<cudaStream_t>(stream)>>>(
      g, masked, sums, top, T, grad);
  return static_cast<int>(cudaGetLastError());
}
#endif
