// Training memory, estimated before the first step: the process as it is once the experiment is
// assembled (libraries, data, weights), plus the gradients and AdamW's two moments of every
// trained parameter, plus the most a training step adds at the batch size (the forward pass's
// graph kept for backward and backward's own buffers) and a pass without gradients at the
// evaluation batch, each measured as the heap's peak: at its own size up to 8 samples, else over
// 4 and 8 samples, each moment extrapolated linearly (extrapolate_peak); or, when it is more,
// what the reference scores hold before training starts (docs/reliability.md checks the
// estimate against measured peaks).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "htm/error.h"
#include "train/experiment.h"

namespace c10 {
class DebugInfoGuard;
}

namespace htm {

struct MemoryEstimate {
  int64_t parameters = 0;      ///< every parameter
  int64_t trained = 0;         ///< those a step updates
  double resident_mib = 0;     ///< this process once assembled: libraries, data, weights
  double gradients_mib = 0;    ///< fp32, one per trained parameter
  double moments_mib = 0;      ///< AdamW's first and second moments
  double activations_mib = 0;  ///< a step's peak at `batch`: kept for backward, then backward's buffers
  double evaluation_mib = 0;   ///< a pass without gradients at `eval_batch` (evaluation, between steps)
  double baselines_mib = 0;    ///< the reference scores computed before training (train/baselines.h)
  int64_t batch = 0, rollouts = 1, eval_batch = 0;  ///< a step passes batch × rollouts rows
  /// The process plus whichever phase holds more: the references first, then training. Training
  /// adds its pass and evaluation's: the blocks a step frees stay with the allocator (glibc keeps
  /// them in its arenas), and evaluation's, of other sizes, mostly do not fit into them. Measured
  /// (docs/reliability.md), the peak is the sum's, not the larger one's.
  double total_mib() const {
    return resident_mib + std::max(baselines_mib, gradients_mib + moments_mib + activations_mib + evaluation_mib);
  }
};

/// The estimate for `ex` (assembled). Draws nothing from any generator a run uses: a run that
/// was estimated trains exactly as one that was not.
MemoryEstimate estimate_training_memory(Experiment& ex);

/// The most memory one training step over `inputs` training samples adds before its update, in
/// MiB: the step as the trainer takes it (each input repeated for the estimator's rollouts, the
/// losses, the estimator's objective, replay), its forward graph kept for backward, then
/// backward's own buffers (the gradients flowing back, the parameters' gradients as they are
/// made), as the heap's peak sampled at each tensor allocation. The model's mode is the caller's.
double step_peak_mib(Experiment& ex, int64_t inputs);
/// The same for one pass without gradients over `n` samples, as evaluation runs.
double eval_peak_mib(Experiment& ex, int64_t n);

/// The heap a measured pass holds above its start, in MiB, at each of its tensor allocations
/// and at its end: the peaks above are its largest value.
using HeapTrace = std::vector<double>;
HeapTrace step_heap_trace(Experiment& ex, int64_t inputs);
HeapTrace eval_heap_trace(Experiment& ex, int64_t n);
/// The peak of a pass over `n` samples from its traces over `n_small` and `n_large` samples: each
/// moment of the pass extrapolated along the line through its two values, the largest taken
/// (never below the larger pass's own peak). A step's peak may move as the samples grow: the
/// quickstart at width 256 peaks at the parameters' gradients, made last in backward, over 4
/// samples, and where forward's graph is whole over 256; a line through the two peaks alone fell
/// 39 % short there. Traces of other lengths (the passes allocated differently) give that line.
double extrapolate_peak(const HeapTrace& small, int64_t n_small, const HeapTrace& large, int64_t n_large, int64_t n);

/// What this process may still use: MemAvailable, or less where a cgroup (v2) limit is set.
/// HTM_MEMORY_AVAILABLE_MIB, when set, stands for both (a smaller machine, for tests).
struct AvailableMemory {
  double mib = 0;
  std::string source;  ///< "MemAvailable" or "the cgroup's memory.max"
};
AvailableMemory available_memory();

/// A run refused for memory: an htm::Error (bad input, nothing recorded) whatever code was
/// allocating when it was raised, a plugin's included.
class MemoryRefused : public Error {
 public:
  using Error::Error;
};

/// When `e` is the CPU allocator's refusal of one block (a c10::Error with libtorch's "… you
/// tried to allocate N bytes", a size the system will not give at all, which AllocationLimit never
/// sees), the MemoryRefused that says so for run `label`, with `available`; else nothing.
std::optional<MemoryRefused> refused_allocation(const std::exception& e, const std::string& label,
                                                const AvailableMemory& available);

/// While one lives, the CPU tensors this thread allocates are counted, net of those it frees, and
/// the allocation that takes the count past `available` throws MemoryRefused: a run whose data
/// and weights alone do not fit is refused at the allocation that passes what is available,
/// before that tensor is written and before the kernel's OOM killer would end the process (the
/// tensors allocated before it are written already). `label` names the run in the message. The
/// refused block itself is not handed back: the process is about to refuse the run.
class AllocationLimit {
 public:
  AllocationLimit(const std::string& label, const AvailableMemory& available);
  ~AllocationLimit();
  AllocationLimit(const AllocationLimit&) = delete;
  AllocationLimit& operator=(const AllocationLimit&) = delete;
  double counted_mib() const;  ///< allocated and not freed since it was made

 private:
  class Watch;
  std::shared_ptr<Watch> watch_;
  std::unique_ptr<c10::DebugInfoGuard> installed_;
};

/// "1.7 GiB (process with weights and data 301 MiB, gradients 22, AdamW moments 44, activations
/// 1331 at batch 256, evaluation 410 at batch 256; references before training 527)"
std::string describe(const MemoryEstimate& estimate);

/// A memory field of /proc/self/status ("VmRSS", "VmHWM"), in MiB.
double status_mib(const char* field);
/// This process's peak resident memory so far (VmHWM), in MiB.
double peak_resident_mib();

/// Called after a process's first training step (the trainer's and `htm bench`'s); acts once per
/// process: glibc's heap from then on serves blocks up to 32 MiB itself and keeps up to 64 MiB of
/// freed memory at its top, where by default it returns the top above twice the largest block
/// freed so far (a few MiB at small widths) and faults the same pages in again at the next pass.
/// The first step is left to glibc's own thresholds, which grow with the blocks it frees: set
/// before it, the paper-size step's heap came out 26 MiB larger (docs/performance.md). Left alone
/// where GLIBC_TUNABLES sets either threshold, or HTM_MALLOC=default (`keep`, the default, or any
/// other value, named in one warning line, sets them). Whether this call set them.
bool keep_freed_memory();
/// Whether keep_freed_memory leaves glibc alone under these GLIBC_TUNABLES and HTM_MALLOC values
/// (null: unset).
bool malloc_left_alone(const char* glibc_tunables, const char* htm_malloc);

}  // namespace htm
