#include "config/device.h"

#include <dlfcn.h>

#include <regex>

#include <torch/cuda.h>
#if HTM_CUDA_STATS
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace htm {

bool cuda_usable() {
  static const bool usable = [] {
    // A CUDA libtorch registers its GPU half when libtorch_cuda loads; a linker that drops
    // libraries nothing calls directly may have left it out. Load it before libtorch is first
    // asked (it remembers the first answer). Absent (a CPU libtorch): nothing happens.
    dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL);
    return torch::cuda::is_available();
  }();
  return usable;
}

std::string device_usable(const std::string& device) {
  static const std::regex form("cpu|cuda(:[0-9]+)?");
  if (!std::regex_match(device, form)) return "\"cpu\", \"cuda\" or \"cuda:N\"";
  if (device == "cpu") return {};
  const int64_t gpus = cuda_usable() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  if (gpus == 0) return "\"cpu\": this htm's libtorch has no CUDA or sees no GPU (a CUDA build: docs/gpu.md)";
  if (device.size() > 5 && (device.size() > 10 || std::stoll(device.substr(5)) >= gpus))
    return "a GPU index below " + std::to_string(gpus) + " (the GPUs this process sees)";
  return {};
}

bool gpu_memory_stats_built() { return HTM_CUDA_STATS != 0; }

#if HTM_CUDA_STATS
namespace {
c10::DeviceIndex index_of(const c10::Device& device) { return device.has_index() ? device.index() : 0; }

// The most bytes requested, where this torch's DeviceStats counts them (requested_bytes: 2.1 and
// later); -1 before.
template <class Stats>
auto requested_peak(const Stats& stats, int) -> decltype(static_cast<double>(stats.requested_bytes[0].peak)) {
  return static_cast<double>(stats.requested_bytes[0].peak);
}
template <class Stats>
double requested_peak(const Stats&, long) {
  return -1;
}
}  // namespace

void reset_gpu_peak(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
}

GpuPeaks gpu_peaks(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  constexpr double kMiB = 1024.0 * 1024.0;  // [0]: all pools
  const double requested = requested_peak(stats, 0);
  return {static_cast<double>(stats.allocated_bytes[0].peak) / kMiB,
          static_cast<double>(stats.reserved_bytes[0].peak) / kMiB,
          static_cast<double>(stats.allocated_bytes[0].current) / kMiB, requested < 0 ? -1 : requested / kMiB};
}
#else
void reset_gpu_peak(const c10::Device&) {}
GpuPeaks gpu_peaks(const c10::Device&) { return {}; }
#endif

c10::Device run_device(const std::string& device, int local_rank) {
  if (device == "cuda") return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(local_rank));
  return c10::Device(device);
}

}  // namespace htm
