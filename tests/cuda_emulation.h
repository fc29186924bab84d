// htm's CUDA kernels' own code run on the CPU: a block emulated by one thread a CUDA thread,
// with threadIdx, blockIdx and blockDim per thread, __syncthreads() and __syncthreads_or() as
// barriers of the block, __shfl_down_sync() through a warp's slots between two barriers of the
// warp, and the block's dynamic shared memory (HTM_SHARED, kernels/host_device.h). Blocks run one
// after another. Include this, then a kernel's .cu file (its launches are left out), and call
// emulation::launch(grid, block, shared_bytes, kernel, args...).
//
// emulation::schedule says how a block's threads take turns. Free (seed 0, the default): all at
// once, std::threads in the operating system's order. Drawn (seed > 0): coroutines of the
// launching thread, one at a time, each running from one barrier (of its block or its warp) to its next, the next
// thread to run drawn from the seed at every switch. A kernel whose result hangs on the order of its threads between
// two barriers (a race: a shared or global word written by one thread and read or written by another with no barrier
// between them) then gives other results under other seeds, where a GPU would give them from one launch to the next.
// And the block's shared memory starts as `fill` bytes, as a GPU's is not cleared, so a kernel that reads a word it
// never wrote reads another value under another fill. What it cannot show: a race inside one stretch between barriers
// whose result does not hang on the order of whole stretches (two read-modify-writes of one word interleaved), and
// device arithmetic (expf, logf, fused multiply-adds), which is the host's here.
#pragma once

#define HTM_CUDA_EMULATION 1

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include <ucontext.h>

#define __global__
#define __device__
#define __host__

namespace htm::emulation {

struct Dim {
  unsigned x = 0, y = 0, z = 0;
};

struct Schedule {
  uint64_t seed = 0;       // 0: free; else the draws of a drawn schedule
  unsigned char fill = 0;  // every byte of a block's shared memory at its start
};
inline Schedule schedule;
inline void PrintTo(const Schedule& s, std::ostream* os) {  // GoogleTest's name for a case's schedule
  if (s.seed == 0)
    *os << "free, fill " << int{s.fill};
  else
    *os << "drawn from seed " << s.seed << ", fill " << int{s.fill};
}

struct Block;
inline thread_local Dim thread_index, block_index, block_dim;
inline thread_local Block* block = nullptr;

/// A coroutine's saved place: its stack pointer (x86-64) or its ucontext (elsewhere). glibc's
/// swapcontext saves and restores the signal mask, a system call at every switch (19 million of
/// them in these tests, 48 s of system time): on x86-64 a switch saves the registers the ABI
/// says a call keeps (rbx, rbp, r12–r15, the SSE and x87 control words) on the stack it leaves,
/// and pops them from the stack it enters, as Boost.Context's does.
#if defined(__x86_64__)
struct Fiber {
  void* sp = nullptr;
  /// Ready to run entry() on [stack, stack + size), entry never returning.
  void start(char* stack, size_t size, void (*entry)()) {
    auto* p = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t{15});
    *--p = 0;                                  // entry's return address: it never returns
    *--p = reinterpret_cast<uint64_t>(entry);  // where the first switch in returns to
    for (int r = 0; r < 6; ++r) *--p = 0;      // r15, r14, r13, r12, rbx, rbp
    p -= 2;                                    // the control words, at +8 and +12
    uint32_t mxcsr = 0;
    uint16_t fpu = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpu));
    std::memcpy(reinterpret_cast<char*>(p) + 8, &mxcsr, sizeof mxcsr);
    std::memcpy(reinterpret_cast<char*>(p) + 12, &fpu, sizeof fpu);
    sp = p;
  }
};
// switch_stacks(&from.sp, to.sp): the callee-saved registers pushed, the stack pointer saved, the
// other stack's taken and its registers popped; its `ret` returns where that fiber left off.
__attribute__((naked, noinline)) static void switch_stacks(void** /*save*/, void* /*load*/) {
  asm volatile(
      "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "subq $16, %rsp\n\tstmxcsr 8(%rsp)\n\tfnstcw 12(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "ldmxcsr 8(%rsp)\n\tfldcw 12(%rsp)\n\taddq $16, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret");
}
inline void switch_fiber(Fiber& from, Fiber& to) { switch_stacks(&from.sp, to.sp); }
#else
struct Fiber {
  ucontext_t context;
  void start(char* stack, size_t size, void (*entry)()) {
    getcontext(&context);
    context.uc_stack.ss_sp = stack;
    context.uc_stack.ss_size = size;
    context.uc_link = nullptr;
    makecontext(&context, entry, 0);
  }
};
inline void switch_fiber(Fiber& from, Fiber& to) { swapcontext(&from.context, &to.context); }
#endif

/// A drawn schedule's block: its threads as coroutines (Fiber) of the launching thread, one
/// running at a time; at a barrier, or at its end, a thread hands the turn to one drawn among
/// those not waiting at a barrier. (OS threads handing a turn on took a minute for what this
/// does in seconds: every barrier of every thread was two context switches of the kernel's.)
class Turns {
 public:
  Turns(unsigned threads, uint64_t seed) : place_(threads), contexts_(threads), stacks_(threads), rng_(seed) {
    for (unsigned t = 0; t < threads; ++t) place_[t] = t, ready_.push_back(t);
  }

  /// Runs body() as every thread of the block, to the end of the last.
  void run(std::function<void()> body) {
    body_ = std::move(body);
    for (size_t t = 0; t < contexts_.size(); ++t) {
      stacks_[t].reset(new char[kStack]);  // not make_unique's zeroed bytes: a thread touches a few pages of it
      contexts_[t].start(stacks_[t].get(), kStack, &Turns::entry);
    }
    Turns* outer = active;
    active = this;
    const unsigned first = draw();
    thread_index.x = first;
    switch_fiber(main_, contexts_[first]);
    active = outer;
    if (finished_ < contexts_.size()) {  // back with threads left: they wait at a barrier
      std::fprintf(stderr, "emulated block deadlocked: a thread waits at a barrier the others never reach\n");
      std::abort();
    }
  }

  /// t arrives at a barrier of `count` threads, `there` those already at it.
  void arrive(unsigned t, std::vector<unsigned>& there, unsigned count) {
    there.push_back(t);
    if (there.size() == count) {
      for (unsigned w : there)
        if (w != t) make_ready(w);
      there.clear();
    } else {
      leave(t);
    }
    hand_on(t);
  }

 private:
  static constexpr size_t kStack = 64 << 10;
  static constexpr unsigned kNone = ~0u;
  inline static thread_local Turns* active = nullptr;

  static void entry() {
    Turns& turns = *active;
    const unsigned t = thread_index.x;
    turns.body_();
    ++turns.finished_;
    turns.leave(t);
    turns.hand_on(t);  // does not come back
  }

  // ready_: the threads not waiting at a barrier nor done; place_[t]: t's index in it.
  void leave(unsigned t) {
    const unsigned last = ready_.back();
    ready_[place_[t]] = last;
    place_[last] = place_[t];
    ready_.pop_back();
  }
  void make_ready(unsigned t) {
    place_[t] = static_cast<unsigned>(ready_.size());
    ready_.push_back(t);
  }

  void hand_on(unsigned t) {
    const unsigned next = draw();
    if (next == t) return;
    Fiber& to = next == kNone ? main_ : contexts_[next];
    if (next != kNone) thread_index.x = next;
    switch_fiber(contexts_[t], to);
    thread_index.x = t;
  }

  unsigned draw() {  // none: every thread finished, or the rest wait (run() says so)
    if (ready_.empty()) return kNone;
    return ready_[std::uniform_int_distribution<size_t>(0, ready_.size() - 1)(rng_)];
  }

  std::vector<unsigned> ready_, place_;
  size_t finished_ = 0;
  std::vector<Fiber> contexts_;
  std::vector<std::unique_ptr<char[]>> stacks_;
  Fiber main_;
  std::function<void()> body_;
  std::mt19937_64 rng_;
};

/// A barrier of `count` threads, used again and again; under a drawn schedule, the block's turns'.
class Barrier {
 public:
  Barrier(unsigned count, Turns* turns) : count_(count), turns_(turns) {}
  void wait() {
    if (turns_) return turns_->arrive(thread_index.x, there_, count_);
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
  Turns* turns_;
  std::vector<unsigned> there_;
};

/// One block's shared state.
struct Block {
  Block(unsigned threads, size_t shared_bytes, unsigned index)
      : turns(schedule.seed ? std::make_unique<Turns>(threads, schedule.seed * 1000003 + index) : nullptr),
        barrier(threads, turns.get()),
        shared((shared_bytes + 7) / 8 + 1),
        slots(threads) {
    std::memset(shared.data(), schedule.fill, shared.size() * sizeof(uint64_t));
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<Barrier>(32, turns.get()));
  }
  std::unique_ptr<Turns> turns;  // a drawn schedule's
  Barrier barrier;
  std::vector<std::unique_ptr<Barrier>> warps;
  std::vector<uint64_t> shared;  // 8-byte aligned
  std::vector<uint64_t> slots;   // a thread's value in a shuffle
  std::mutex mutex;
  int any = 0;  // __syncthreads_or's
};

inline unsigned char* shared_memory() { return reinterpret_cast<unsigned char*>(block->shared.data()); }

/// Runs kernel(args...) as `grid` blocks of `threads` threads (whole warps) with `shared_bytes` of
/// dynamic shared memory each, under emulation::schedule.
template <class Kernel, class... Args>
void launch(unsigned grid, unsigned threads, size_t shared_bytes, Kernel kernel, Args... args) {
  for (unsigned b = 0; b < grid; ++b) {
    Block one(threads, shared_bytes, b);
    if (one.turns) {
      block_index.x = b, block_dim.x = threads, block = &one;
      one.turns->run([&] { kernel(args...); });
      continue;
    }
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
