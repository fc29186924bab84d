#include "train/memory.h"

#include <torch/version.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include <torch/torch.h>

#include "model/model.h"
#include "train/baselines.h"
#include "train/step.h"

namespace htm {

double status_mib(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string key = std::string(field) + ":";
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size())) / 1024.0;
  return 0;
}

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Bytes the allocator has handed out and not had back (heap chunks and mmap'd blocks, every
// arena): tensors, and what else the process holds (oneDNN's scratch, autograd's nodes).
double heap_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd);
}

}  // namespace

// c10's memory-reporting hook (the one torch's profiler uses) narrowed to what the CPU allocator
// reports: bytes allocated (> 0) or freed (< 0). Its totals are int64_t in libtorch 1.x and
// size_t from 2.0 on.
class CpuAllocations : public c10::MemoryReportingInfoBase {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void reportMemoryUsage(void*, int64_t bytes, size_t, size_t, c10::Device device) override {
#else
  void reportMemoryUsage(void*, int64_t bytes, int64_t, int64_t, c10::Device device) override {
#endif
    if (device.is_cpu()) on_cpu(bytes);
  }
  bool memoryProfilingEnabled() const override { return true; }

 protected:
  virtual void on_cpu(int64_t bytes) = 0;
};

namespace {

// The heap in use while installed, above what it was at the start, sampled at each tensor
// allocation: the moments at which a pass's memory grows.
class HeapWatch final : public CpuAllocations {
 public:
  HeapWatch() : start_(heap_in_use()) {}
  HeapTrace trace() {
    std::lock_guard<std::mutex> lock(mutex_);
    HeapTrace all = trace_;
    all.push_back(std::max(0.0, heap_in_use() - start_) / kMiB);  // and at the end
    return all;
  }

 private:
  std::mutex mutex_;
  double start_;
  HeapTrace trace_;

  void on_cpu(int64_t bytes) override {
    if (bytes <= 0) return;
    const double now = heap_in_use();
    std::lock_guard<std::mutex> lock(mutex_);
    trace_.push_back(std::max(0.0, now - start_) / kMiB);
  }
};

}  // namespace

// Both measure with a generator of their own and put the parameters' gradients back as they were.
namespace {

template <typename Body>
HeapTrace heap_trace(Experiment& ex, Body body) {
  std::vector<torch::Tensor> parameters = ex.model->parameters(), grads;
  for (auto& p : parameters) grads.push_back(std::exchange(p.mutable_grad(), torch::Tensor()));
  auto heap = std::make_shared<HeapWatch>();
  {
    c10::DebugInfoGuard installed(c10::DebugInfoKind::PROFILER_STATE, heap);
    body();
  }
  for (size_t i = 0; i < grads.size(); ++i) parameters[i].mutable_grad() = grads[i];
  return heap->trace();
}

double most(const HeapTrace& trace) { return trace.empty() ? 0.0 : *std::max_element(trace.begin(), trace.end()); }

Batch training_rows(Experiment& ex, int64_t n) {
  return on_device(ex.dataset->get(Split::train, torch::arange(n)), ex.device);
}

}  // namespace

HeapTrace step_heap_trace(Experiment& ex, int64_t inputs) {
  StepRequest request;
  request.batch = training_rows(ex, inputs);
  request.batch_rows = inputs;
  request.schedule = ex.schedule;
  // Built before the heap is watched: its optimisers' moments are counted apart (moments_mib).
  TrainStep step(ex, at::make_generator<at::CPUGeneratorImpl>(0));
  return heap_trace(ex, [&] { step.gradients(request); });
}

HeapTrace eval_heap_trace(Experiment& ex, int64_t n) {
  const Batch batch = training_rows(ex, n);
  return heap_trace(ex, [&] {
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
    ForwardHooks hooks;
    hooks.tree = batch.tree;
    ex.model->forward(batch.input, ex.schedule, gen, &hooks);
  });
}

double extrapolate_peak(const HeapTrace& small, int64_t n_small, const HeapTrace& large, int64_t n_large, int64_t n) {
  double peak = most(large);
  const double ratio = static_cast<double>(n - n_large) / static_cast<double>(n_large - n_small);
  if (small.size() == large.size()) {
    for (size_t i = 0; i < large.size(); ++i) peak = std::max(peak, large[i] + (large[i] - small[i]) * ratio);
  } else {
    peak += std::max(0.0, most(large) - most(small)) * ratio;
  }
  return peak;
}

double step_peak_mib(Experiment& ex, int64_t inputs) { return most(step_heap_trace(ex, inputs)); }
double eval_peak_mib(Experiment& ex, int64_t n) { return most(eval_heap_trace(ex, n)); }

double peak_resident_mib() { return status_mib("VmHWM"); }

bool malloc_left_alone(const char* glibc_tunables, const char* htm_malloc) {
  if (htm_malloc != nullptr && std::string(htm_malloc) == "default") return true;
  return glibc_tunables != nullptr && (std::strstr(glibc_tunables, "mmap_threshold") != nullptr ||
                                       std::strstr(glibc_tunables, "trim_threshold") != nullptr);
}

bool keep_freed_memory() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return false;
  const char* choice = std::getenv("HTM_MALLOC");
  if (choice != nullptr && std::string(choice) != "default" && std::string(choice) != "keep")
    std::fprintf(stderr,
                 "htm: HTM_MALLOC=%s: expected 'default' (glibc's thresholds) or 'keep'; keeping freed memory\n",
                 choice);
  if (malloc_left_alone(std::getenv("GLIBC_TUNABLES"), choice)) return false;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's own largest dynamic threshold on 64 bits
  mallopt(M_TRIM_THRESHOLD, 64 << 20);  // and the trim it pairs with it
  return true;
}

MemoryEstimate estimate_training_memory(Experiment& ex) {
  MemoryEstimate e;
  e.parameters = ex.parameters;
  e.trained = ex.participating;
  e.batch = ex.config.settings.train.batch_size;
  e.rollouts = ex.config.settings.estimator.rollouts;  // at least 1 (settings)
  e.eval_batch = ex.config.settings.train.eval_batch_size;
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
    // A pass over at most 8 samples is measured as it is; a larger one over 4 and 8 samples, and
    // each moment of it extrapolated to the batch (extrapolate_peak).
    auto at = [&](int64_t n, auto measure) {
      if (n <= std::min<int64_t>(8, available)) return most(measure(n));
      const int64_t large = std::min<int64_t>(8, available), small = large / 2;
      HeapTrace at_small = measure(small);
      const HeapTrace at_large = measure(large);
      if (at_small.size() != at_large.size()) at_small = measure(small);  // the first pass's one-time buffers
      return extrapolate_peak(at_small, small, at_large, large, n);
    };
    ex.model->train(true);                                                               // dropout's masks are kept too
    e.activations_mib = at(e.batch, [&](int64_t n) { return step_heap_trace(ex, n); });  // n x rollouts rows
    const int64_t eval_rows = samples_limit(train.eval_samples, ex.dataset->size(Split::test));
    e.eval_batch = std::min(e.eval_batch, std::max<int64_t>(1, eval_rows));  // no batch beyond the samples
    ex.model->train(false);
    e.evaluation_mib = at(e.eval_batch, [&](int64_t n) { return eval_heap_trace(ex, n); });
    ex.model->train(was_training);
    global.set_state(state);
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

std::optional<MemoryRefused> refused_allocation(const std::exception& e, const std::string& label,
                                                const AvailableMemory& available) {
  if (dynamic_cast<const c10::Error*>(&e) == nullptr) return std::nullopt;
  static const std::string said =
      "you tried to allocate ";  // 1.13's "can't allocate memory: …", 2.x's "not enough memory: …"
  const std::string what = e.what();
  const size_t at = what.find(said);
  if (at == std::string::npos) return std::nullopt;
  const double bytes = std::strtod(what.c_str() + at + said.size(), nullptr);
  char text[200];
  std::snprintf(text, sizeof text,
                "one of its tensors asked for %.1f GiB, which the system refused (%.0f MiB available, ",
                bytes / (kMiB * 1024.0), available.mib);
  return MemoryRefused("[" + label + "] cannot be assembled: " + text + available.source +
                       "); is a setting far larger than meant?");
}

class AllocationLimit::Watch final : public CpuAllocations {
 public:
  Watch(std::string label, AvailableMemory available) : label_(std::move(label)), available_(std::move(available)) {}
  double counted_mib() const { return static_cast<double>(net_.load()) / kMiB; }

 private:
  std::string label_;
  AvailableMemory available_;
  std::atomic<int64_t> net_{0};

  void on_cpu(int64_t bytes) override {
    const int64_t now = net_.fetch_add(bytes) + bytes;
    if (bytes <= 0 || static_cast<double>(now) <= available_.mib * kMiB) return;
    char text[160];
    std::snprintf(text, sizeof text, "its data and weights held %.0f MiB when %.0f MiB more were asked to allocate",
                  static_cast<double>(now - bytes) / kMiB, static_cast<double>(bytes) / kMiB);
    throw MemoryRefused("[" + label_ + "] needs more than the " + std::to_string(std::lround(available_.mib)) +
                        " MiB available (" + available_.source + ") to be assembled: " + text +
                        "; htm run --ignore-memory trains it anyway");
  }
};

AllocationLimit::AllocationLimit(const std::string& label, const AvailableMemory& available)
    : watch_(std::make_shared<Watch>(label, available)),
      installed_(std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, watch_)) {}

AllocationLimit::~AllocationLimit() = default;

double AllocationLimit::counted_mib() const { return watch_->counted_mib(); }

std::string describe(const MemoryEstimate& e) {
  char text[400], rollouts[48] = "";
  if (e.rollouts > 1) std::snprintf(rollouts, sizeof rollouts, " x %lld rollouts", static_cast<long long>(e.rollouts));
  const double total = e.total_mib();
  std::snprintf(text, sizeof text,
                "%.*f %s (process with weights and data %.0f MiB, gradients %.0f, AdamW moments %.0f, activations "
                "%.0f at batch %lld%s, evaluation %.0f at batch %lld; references before training %.0f)",
                total >= 1024 ? 1 : 0, total >= 1024 ? total / 1024 : total, total >= 1024 ? "GiB" : "MiB",
                e.resident_mib, e.gradients_mib, e.moments_mib, e.activations_mib, static_cast<long long>(e.batch),
                rollouts, e.evaluation_mib, static_cast<long long>(e.eval_batch), e.baselines_mib);
  return text;
}

}  // namespace htm
