// `htm bench --census`: where one eager training step's memory goes (bench.cpp runs the step).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "train/memory_census.h"

namespace htm {
class TrainStep;
}

namespace htm::bench {

/// One eager step's memory on its device.
struct Census {
  /// The most its memory rose above where it began (-1: not taken); at that moment the tensors
  /// it had made and held, by site, and the phase (0 forward, 1 backward, 2 the optimiser).
  int64_t peak = -1;
  std::vector<MemoryCensus::Site> sites;
  int phase = 0;
  /// Bytes made before the step and freed by the peak, as the allocator reported them (a GPU's
  /// caching allocator does; a CPU's reports none), and the step's own gradients held there.
  int64_t freed = 0, grads = 0;
  /// Before the step: the parameters the two optimisers update, their AdamW moments, and the
  /// gradients the last step left (dropped as the step begins).
  int64_t param_bytes = 0, moment_bytes = 0, old_grad_bytes = 0;
  double gpu_before_mib = -1;  ///< on a GPU: all it had allocated before the step
};

/// Runs `step` (one eager step of `train_step`) under a MemoryCensus of `device`.
Census take_census(TrainStep& train_step, const c10::Device& device, const std::function<void()>& step);

/// The census's lines: what was there before, the peak, and the 20 largest sites at it.
void print_census(const std::string& what, const Census& c);

}  // namespace htm::bench
