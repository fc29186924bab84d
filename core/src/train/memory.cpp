#include "train/memory.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <torch/torch.h>

#include "model/model.h"
#include "train/baselines.h"

namespace htm {

double status_mib(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string key = std::string(field) + ":";
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size())) / 1024.0;
  return 0;
}

namespace {

// Bytes the allocator has handed out and not had back (heap chunks and mmap'd blocks).
double heap_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd);
}

// Heap growth over a forward pass at `n` samples whose graph is kept, as training keeps it for
// backward. Eval mode (no dropout draws) and a generator of its own: no run's stream moves.
double kept_by_forward(Experiment& ex, int64_t n) {
  const Batch batch = on_device(ex.dataset->get(Split::train, torch::arange(n)), ex.device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  ForwardHooks hooks;
  hooks.tree = batch.tree;
  const double before = heap_in_use();
  auto out = ex.model->forward(batch.input, ex.schedule, gen, &hooks);
  return std::max(0.0, heap_in_use() - before);
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

double peak_resident_mib() { return status_mib("VmHWM"); }

MemoryEstimate estimate_training_memory(Experiment& ex) {
  MemoryEstimate e;
  e.parameters = ex.parameters;
  e.trained = ex.participating;
  e.batch = ex.config.settings.train.batch_size;
  e.resident_mib = status_mib("VmRSS");
  e.gradients_mib = 4.0 * static_cast<double>(e.trained) / kMiB;
  e.moments_mib = 2 * e.gradients_mib;
  const TrainSettings& train = ex.config.settings.train;
  e.baselines_mib = baseline_bytes(*ex.dataset, samples_limit(train.train_samples, ex.dataset->size(Split::train)),
                                   samples_limit(train.eval_samples, ex.dataset->size(Split::test)), ex.latent_floats) /
                    kMiB;
  const int64_t available = ex.dataset->size(Split::train);
  if (available >= 2) {
    at::Generator global = at::detail::getDefaultCPUGenerator();  // a handle to the one generator
    const torch::Tensor state = global.get_state();               // plugins may draw from it: put it back
    const bool was_training = ex.model->is_training();
    ex.model->eval();
    const int64_t small = available >= 4 ? 2 : 1, large = 2 * small;
    const double at_small = kept_by_forward(ex, small), at_large = kept_by_forward(ex, large);
    ex.model->train(was_training);
    global.set_state(state);
    const double per_sample = std::max(0.0, (at_large - at_small) / static_cast<double>(large - small));
    const double fixed = std::max(0.0, at_small - per_sample * static_cast<double>(small));
    e.activations_mib = (fixed + per_sample * static_cast<double>(e.batch)) / kMiB;
  }
  return e;
}

AvailableMemory available_memory() {
  AvailableMemory a;
  if (const char* simulated = std::getenv("HTM_MEMORY_AVAILABLE_MIB")) {  // a smaller machine, for tests
    a.mib = std::atof(simulated);
    a.source = "HTM_MEMORY_AVAILABLE_MIB";
    return a;
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      a.mib = std::stod(line.substr(13)) / 1024.0;
      a.source = "MemAvailable";
    }
  std::ifstream cgroup_file("/proc/self/cgroup");  // cgroup v2: "0::/path"
  std::string cgroup;
  for (std::string line; std::getline(cgroup_file, line);)
    if (line.rfind("0::", 0) == 0) cgroup = line.substr(3);
  auto read = [&](const std::string& name) {
    std::ifstream in("/sys/fs/cgroup" + cgroup + "/" + name);
    std::string text;
    in >> text;
    return text;
  };
  const std::string max = read("memory.max"), current = read("memory.current");
  if (!max.empty() && max != "max" && !current.empty()) {
    const double left = (std::stod(max) - std::stod(current)) / kMiB;
    if (left < a.mib || a.source.empty()) {
      a.mib = std::max(0.0, left);
      a.source = "the cgroup's memory.max";
    }
  }
  return a;
}

std::string describe(const MemoryEstimate& e) {
  char text[320];
  const double total = e.total_mib();
  std::snprintf(text, sizeof text,
                "%.*f %s (process with weights and data %.0f MiB, gradients %.0f, AdamW moments %.0f, activations "
                "%.0f at batch %lld; references before training %.0f)",
                total >= 1024 ? 1 : 0, total >= 1024 ? total / 1024 : total, total >= 1024 ? "GiB" : "MiB",
                e.resident_mib, e.gradients_mib, e.moments_mib, e.activations_mib, static_cast<long long>(e.batch),
                e.baselines_mib);
  return text;
}

}  // namespace htm
