// runtime.device: which device a run's tensors live on.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace htm {

/// Empty when `device` names a device this process can use ("cpu"; "cuda" or "cuda:N" where the
/// linked libtorch has CUDA and sees that GPU); otherwise what was expected, for the config's
/// "expects …" sentence.
std::string device_usable(const std::string& device);

/// The device a process runs on: `device` as written, except that a bare "cuda" gives a
/// data-parallel process the GPU of its local rank (cuda:<local_rank>).
c10::Device run_device(const std::string& device, int local_rank);

/// Whether the linked libtorch was built with CUDA and sees at least one GPU.
bool cuda_usable();

/// Whether this build reads the CUDA caching allocator's statistics (a CUDA libtorch whose
/// allocator header compiled: core/CMakeLists.txt).
bool gpu_memory_stats_built();

/// Starts a new peak of the memory allocated on `device` (a GPU; nothing elsewhere).
void reset_gpu_peak(const c10::Device& device);

/// The most memory on `device` since the last reset, in MiB; 0 where not built or not a GPU.
struct GpuPeaks {
  double allocated = 0;  ///< in tensors (what torch.cuda.max_memory_allocated reports)
  double reserved = 0;   ///< held by the allocator: cached blocks and a CUDA graph's pool too
  double now = 0;        ///< allocated in tensors now (torch.cuda.memory_allocated)
  /// the most the tensors asked for (torch 2.1 and later; -1 before): allocated less the
  /// allocator's rounding and the blocks it gave whole rather than split
  double requested = -1;
};
GpuPeaks gpu_peaks(const c10::Device& device);

}  // namespace htm
