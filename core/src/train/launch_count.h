// How many kernels a piece of work launches, counted on any device: `htm bench` prints a step's
// by phase, the tests compare two ways of doing the same work. On a GPU a step that is bound by
// its launches (a small model's, eager or replayed as a CUDA graph: a node each) costs about
// this many times a launch; on the CPU the same ops run, so the count is the GPU's, about.
#pragma once

#include <cstdint>
#include <vector>

namespace htm {

/// While one lives, every torch op run on any thread outside any other counted op is counted
/// (a composite as one: `linear`, a foreach op whose CPU form loops over its tensors), except
/// views and maybe-views (whose schema returns an alias of an input, as `to`, `reshape` and
/// `contiguous` may: the copy inside one counts), allocations without a fill, and reads of a
/// value to the host (counted apart). An op that launches several kernels on a GPU (a sort, a
/// layer norm's backward) counts once: about a GPU's launches, not exactly. One at a time.
class LaunchCount {
 public:
  LaunchCount();
  ~LaunchCount();
  LaunchCount(const LaunchCount&) = delete;
  LaunchCount& operator=(const LaunchCount&) = delete;

  /// The ops counted so far, in all.
  int64_t launches() const;
  /// .item() and the like: values read to the host (each a wait for the device).
  int64_t host_reads() const;
  /// Starts a new phase: what follows counts there (phases()[k], from phase 0).
  void next_phase();
  std::vector<int64_t> phases() const;
};

}  // namespace htm
