// htm's CUDA kernels' own code run on the CPU: a block emulated by one std::thread a CUDA thread,
// with threadIdx, blockIdx and blockDim per thread, __syncthreads() and __syncthreads_or() as
// barriers of the block, __shfl_down_sync() through a warp's slots between two barriers of the
// warp, and the block's dynamic shared memory (HTM_SHARED, kernels/host_device.h). Blocks run one
// after another. Include this, then a kernel's .cu file (its launches are left out), and call
// emulation::launch(grid, block, shared_bytes, kernel, args...). What it cannot show: a race
// the barriers' order happens to hide, and device arithmetic (expf, logf, fused multiply-adds),
// which is the host's here.
#pragma once

#define HTM_CUDA_EMULATION 1

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__

namespace htm::emulation {

struct Dim {
  unsigned x = 0, y = 0, z = 0;
};

/// A barrier of `count` threads, used again and again.
class Barrier {
 public:
  explicit Barrier(unsigned count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      all_.notify_all();
      return;
    }
    all_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_;
  unsigned count_, arrived_ = 0;
  uint64_t generation_ = 0;
};

/// One block's shared state.
struct Block {
  Block(unsigned threads, size_t shared_bytes) : barrier(threads), shared((shared_bytes + 7) / 8 + 1), slots(threads) {
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<Barrier>(32));
  }
  Barrier barrier;
  std::vector<std::unique_ptr<Barrier>> warps;
  std::vector<uint64_t> shared;  // 8-byte aligned
  std::vector<uint64_t> slots;   // a thread's value in a shuffle
  std::mutex mutex;
  int any = 0;  // __syncthreads_or's
};

inline thread_local Dim thread_index, block_index, block_dim;
inline thread_local Block* block = nullptr;

inline unsigned char* shared_memory() { return reinterpret_cast<unsigned char*>(block->shared.data()); }

/// Runs kernel(args...) as `grid` blocks of `threads` threads (whole warps) with `shared_bytes` of
/// dynamic shared memory each.
template <class Kernel, class... Args>
void launch(unsigned grid, unsigned threads, size_t shared_bytes, Kernel kernel, Args... args) {
  for (unsigned b = 0; b < grid; ++b) {
    Block one(threads, shared_bytes);
    std::vector<std::thread> team;
    for (unsigned t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        thread_index.x = t, block_index.x = b, block_dim.x = threads, block = &one;
        kernel(args...);
      });
    for (auto& thread : team) thread.join();
  }
}

}  // namespace htm::emulation

#define threadIdx (::htm::emulation::thread_index)
#define blockIdx (::htm::emulation::block_index)
#define blockDim (::htm::emulation::block_dim)

inline void __syncthreads() { ::htm::emulation::block->barrier.wait(); }

// Every thread's predicate OR-ed: the block waits, reads, waits again; the first thread clears it
// for the next call (which comes after another barrier of the kernels').
inline int __syncthreads_or(int predicate) {
  auto* b = ::htm::emulation::block;
  {
    std::lock_guard<std::mutex> lock(b->mutex);
    b->any |= predicate != 0;
  }
  b->barrier.wait();
  const int any = b->any;
  b->barrier.wait();
  if (threadIdx.x == 0) b->any = 0;
  return any;
}

// Lane i gets lane i + offset's value (its own where that is past the warp).
template <class T>
T __shfl_down_sync(unsigned, T value, int offset) {
  static_assert(sizeof(T) <= 8, "a shuffle of up to 8 bytes");
  auto* b = ::htm::emulation::block;
  const unsigned t = threadIdx.x, lane = t % 32;
  auto& warp = *b->warps[t / 32];
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  b->slots[t] = bits;
  warp.wait();
  T out = value;
  if (lane + offset < 32) std::memcpy(&out, &b->slots[t + offset], sizeof(T));
  warp.wait();
  return out;
}
