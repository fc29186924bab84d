// The host reads a stand-in for a CUDA graph refuses on the CPU (step_graph_test.cpp,
// eval_graph_test.cpp): every .item() and .to(device) htm's code calls outside any torch op, as
// CUDA refuses a capture that reads a device value on the host or copies between them.
#pragma once

#include <ATen/record_function.h>

#include <memory>
#include <string>
#include <vector>

namespace htm {

// The reads counted while one lives on this thread.
struct HostReads {
  int64_t count = 0;
  int64_t dispatched = 0;        // torch ops called outside any other torch op (a GPU's launches, about)
  std::vector<std::string> ops;  // the torch ops open on this thread, innermost last
  at::CallbackHandle handle;
  static inline thread_local HostReads* now = nullptr;
  HostReads() {
    now = this;
    handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              const std::string name = fn.name();
              const std::string caller = now->ops.empty() ? "" : now->ops.back();
              if (name == "aten::item" && caller.rfind("aten::", 0) != 0) ++now->count;     // .item() in htm's code
              if (name == "aten::to" && (caller.empty() || caller.rfind("htm::", 0) == 0))  // .to(device) there
                for (const auto& input : fn.inputs()) now->count += input.isDevice() ? 1 : 0;
              if (name.rfind("aten::", 0) == 0 && caller.rfind("aten::", 0) != 0) ++now->dispatched;
              now->ops.push_back(name);
              return nullptr;
            },
            [](const at::RecordFunction&, at::ObserverContext*) { now->ops.pop_back(); })
            .needsInputs(true));
  }
  ~HostReads() { at::removeCallback(handle), now = nullptr; }
  HostReads(const HostReads&) = delete;
  HostReads& operator=(const HostReads&) = delete;
};

}  // namespace htm
