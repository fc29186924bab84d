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

}  // namespace htm
