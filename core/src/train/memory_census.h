// Where a step's memory goes: the tensors alive at its peak, by where each was made. `htm bench
// --census` prints it for one step. The count is torch's own (every allocation of a tensor's
// storage the allocator reports to a profiler: the CPU's, and a GPU's caching allocator's), so
// on a CPU it is the CPU's tensors: what a GPU step holds, less the attention weights a GPU's
// fused kernel does not keep and plus the ones the CPU's unfused attention does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace htm {

/// While one lives on this thread (and the threads autograd and torch hand its work to), every
/// tensor allocated on `device` ("cpu", "cuda:0") is counted with its site: the innermost htm
/// scope around it (RECORD_FUNCTION("htm::…")), the autograd node in backward, and the
/// outermost torch op. One at a time.
class MemoryCensus {
 public:
  struct Site {
    std::string where;  ///< "htm::merge_layer aten::linear", "htm::backward MmBackward0 aten::mm"
    int64_t bytes = 0;
  };

  explicit MemoryCensus(const std::string& device = "cpu");
  ~MemoryCensus();
  MemoryCensus(const MemoryCensus&) = delete;
  MemoryCensus& operator=(const MemoryCensus&) = delete;

  /// Bytes allocated since it began and still alive.
  int64_t live_bytes() const;
  /// Bytes of tensors made before it began and freed since (a step's last gradients, say).
  int64_t freed_earlier_bytes() const;
  /// The most the memory rose above where it stood when the census began: the most, at any one
  /// moment, of the live bytes less the bytes made earlier and freed by then (what a GPU's
  /// max_memory_allocated less the memory allocated at the start measures).
  int64_t peak_bytes() const;
  /// At that moment (within 1 MiB of it: taken when the peak grew by 1 MiB or more): the live
  /// bytes by site, largest first; the bytes made earlier and freed by then; the phase it was in
  /// (0, then one more at each next_phase()); and how many of the live bytes are held by
  /// allocations alive now whose data pointers `among` names (a model's gradients, say).
  std::vector<Site> at_peak() const;
  int64_t freed_earlier_at_peak() const;
  int phase_at_peak() const;
  int64_t at_peak_among(const std::vector<const void*>& among) const;
  /// Marks the start of the next phase (forward, backward, the optimiser).
  void next_phase();

  struct State;

 private:
  struct Installed;
  std::shared_ptr<State> state_;
  std::unique_ptr<Installed> installed_;
};

}  // namespace htm
