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

  /// Bytes allocated since it began and still alive, and the most there were at once.
  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  /// The live bytes at the peak by site, largest first (taken when the peak grew by 1 MiB or
  /// more, so within 1 MiB of it).
  std::vector<Site> at_peak() const;

  struct State;

 private:
  struct Installed;
  std::shared_ptr<State> state_;
  std::unique_ptr<Installed> installed_;
};

}  // namespace htm
