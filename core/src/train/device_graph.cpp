#include "train/device_graph.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "htm/error.h"

#if HTM_CUDA_GRAPHS
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace htm {

#if HTM_CUDA_GRAPHS
namespace {

class CudaGraph final : public DeviceGraph {
 public:
  explicit CudaGraph(const c10::Device& device)
      : device_(device), side_(at::cuda::getStreamFromPool(false, device.index())) {}

  void eager(const std::function<void()>& work) override { on_side(work); }

  void capture(const std::function<void()>& work, DeviceGraph* pool) override {
    std::string failure;
    // The warm-ups' cached blocks back to the device first: the capture's pool cannot use them,
    // and held beside it they set the card's peak (lease 5: 8001 MiB at the capture, B = 64).
    c10::cuda::CUDACachingAllocator::emptyCache();
    using Pool = decltype(graph_.pool());  // a pair of ids; {0, 0}: a pool of its own
    const Pool shared = pool != nullptr ? static_cast<CudaGraph*>(pool)->graph_.pool() : Pool{0, 0};
    on_side([&] {
      graph_.capture_begin(shared, cudaStreamCaptureModeThreadLocal);
      try {
        work();
      } catch (const std::exception& e) {
        failure = e.what();
      }
      try {
        graph_.capture_end();
#if HTM_CUDA_GRAPH_NODES
        size_t n = 0;  // kept by keep_graph until counted, then instantiated as capture_end would
        if (cudaGraphGetNodes(graph_.raw_cuda_graph(), nullptr, &n) == cudaSuccess) nodes_ = static_cast<int64_t>(n);
        graph_.instantiate();
#endif
      } catch (const std::exception& e) {
        if (failure.empty()) failure = e.what();
      }
    });
    if (failure.empty()) return;
    (void)cudaGetLastError();  // a refused call during capture leaves its error behind
    // HTM_GRAPH_DEBUG=1: the whole message (with TORCH_SHOW_CPP_STACKTRACES=1, where it was raised).
    const char* debug = std::getenv("HTM_GRAPH_DEBUG");
    if (debug != nullptr && std::string(debug) == "1") std::fprintf(stderr, "%s\n", failure.c_str());
    throw Error("the step could not be captured as a CUDA graph: " + failure.substr(0, failure.find('\n')));
  }

  void replay() override { graph_.replay(); }
  int64_t nodes() const override { return nodes_; }

 private:
  // `work` with the side stream current, after the current stream's work and before its next.
  template <class Work>
  void on_side(Work&& work) {
    c10::cuda::CUDAGuard device_guard(device_);
    const auto main = at::cuda::getCurrentCUDAStream(device_.index());
    at::cuda::CUDAEvent before;
    before.record(main);
    before.block(side_);
    {
      c10::cuda::CUDAStreamGuard on_side(side_);
      work();
    }
    at::cuda::CUDAEvent after;
    after.record(side_);
    after.block(main);
  }

  c10::Device device_;
  at::cuda::CUDAStream side_;
#if HTM_CUDA_GRAPH_NODES
  at::cuda::CUDAGraph graph_{/*keep_graph=*/true};
#else
  at::cuda::CUDAGraph graph_;
#endif
  int64_t nodes_ = -1;
};

}  // namespace
#endif

namespace {
std::function<std::unique_ptr<DeviceGraph>(const c10::Device&)>& graph_maker() {
  static std::function<std::unique_ptr<DeviceGraph>(const c10::Device&)> make;
  return make;
}
}  // namespace

std::string describe_nodes(const std::vector<int64_t>& nodes) {
  std::string s;
  for (int64_t n : nodes)
    if (n >= 0) s += (s.empty() ? " (" : ", ") + std::to_string(n);
  return s.empty() ? s : s + " nodes)";
}

void set_device_graph_maker(std::function<std::unique_ptr<DeviceGraph>(const c10::Device&)> make) {
  graph_maker() = std::move(make);
}

std::unique_ptr<DeviceGraph> make_device_graph(const c10::Device& device) {
  if (graph_maker()) return graph_maker()(device);
#if HTM_CUDA_GRAPHS
  if (device.is_cuda()) return std::make_unique<CudaGraph>(device);
#endif
  (void)device;
  return nullptr;
}

LaterRead::LaterRead(const at::Tensor& scalar) {
  const auto value = scalar.detach().to(at::kDouble).reshape({});
  if (value.device().is_cpu()) {
    host_ = value.clone();  // as it is now, whatever is done to `scalar` after
    return;
  }
  host_ = value.to(at::kCPU, /*non_blocking=*/true);  // host: into pinned memory, queued on the device's stream
  const auto type = value.device().type();
  copied_ = std::make_shared<c10::Event>(type);
  copied_->record(c10::impl::getDeviceGuardImpl(type)->getStream(value.device()));
}

double LaterRead::value() {
  if (copied_)  // (c10::Event has no wait in libtorch 1.13; query() in both)
    while (!copied_->query()) std::this_thread::yield();
  const double v = host_.item<double>();
  host_ = at::Tensor(), copied_.reset();
  return v;
}

void seed_device_generator(const c10::Device& device, uint64_t seed) {
  at::Generator gen =
      device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

}  // namespace htm
