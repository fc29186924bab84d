// A captured and replayable stretch of device work: a CUDA graph (at::cuda::CUDAGraph) where the
// libtorch has CUDA, nothing elsewhere. No CUDA header here: the CPU build compiles every caller.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>

namespace htm {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  /// Runs `work` on this graph's side stream (the work before a capture: warm-ups), ordered after
  /// what the current stream holds and before what it is given next.
  virtual void eager(const std::function<void()>& work) = 0;
  /// Captures `work` on the side stream: its kernels are recorded, not run; with `pool`, into that
  /// graph's memory pool (safe where one graph's outputs are used before another is replayed).
  /// Throws htm::Error, naming what CUDA said, when the capture fails (a host read, a copy from
  /// the host, another generator): nothing is kept then, and the device is usable as before.
  virtual void capture(const std::function<void()>& work, DeviceGraph* pool = nullptr) = 0;
  /// Runs what was captured on the current stream: one launch.
  virtual void replay() = 0;
  /// The nodes (kernels, copies, fills) the capture recorded, which a replay runs one after
  /// another; −1 where this torch does not say.
  virtual int64_t nodes() const { return -1; }
};

/// " (1394, 1399 nodes)": the graphs' nodes() where known (a summary's), empty otherwise.
std::string describe_nodes(const std::vector<int64_t>& nodes);

/// A graph on `device`, or null where it cannot have one (not CUDA, or a libtorch without CUDA).
std::unique_ptr<DeviceGraph> make_device_graph(const c10::Device& device);

/// For a test on a machine without CUDA: while set, make_device_graph() returns what `make`
/// returns, for any device (tests/step_graph_test.cpp's stand-in runs the work a capture would
/// record and refuses host reads as CUDA does). An empty function restores the default.
void set_device_graph_maker(std::function<std::unique_ptr<DeviceGraph>(const c10::Device&)> make);

/// A scalar on a device, read on the host later without waiting for the work queued after it:
/// its copy to the host is queued at once (on a GPU into pinned memory, marked by an event) and
/// value() waits for that copy alone. The trainer reads a step's loss so, once the next step is
/// under way: the host prepares a step while the device runs the one before. On the CPU it
/// holds the value.
class LaterRead {
 public:
  LaterRead() = default;
  explicit LaterRead(const at::Tensor& scalar);
  bool pending() const { return host_.defined(); }
  /// The value (float64), waiting for its copy; the read is then done (pending() is false).
  double value();

 private:
  at::Tensor host_;
  std::shared_ptr<c10::Event> copied_;
};

/// Reseeds `device`'s default generator (its Philox offset back to 0): what a captured step draws.
void seed_device_generator(const c10::Device& device, uint64_t seed);

}  // namespace htm
