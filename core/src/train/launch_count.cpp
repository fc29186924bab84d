// LaunchCount (launch_count.h): a global RecordFunction callback, so the autograd engine's own
// threads (a GPU's backward runs on one) are counted with the caller's.
#include "train/launch_count.h"

#include <ATen/record_function.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "htm/error.h"

namespace htm {
namespace {

constexpr size_t kPhases = 8;
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_phase{0};
std::array<std::atomic<int64_t>, kPhases> g_launches{};
std::atomic<int64_t> g_reads{0};
at::CallbackHandle g_handle = 0;

// Each open op on this thread: whether it or an op around it was counted (the work inside a
// counted op is that op's: a composite's parts, a CPU's per-tensor loop of a foreach op).
thread_local std::vector<bool> t_covered;

bool is_read(const char* name) { return std::strcmp(name, "aten::_local_scalar_dense") == 0; }

bool is_idle(const at::RecordFunction& fn) {
  static const char* const kAllocations[] = {"aten::empty",      "aten::empty_strided", "aten::empty_like",
                                             "aten::new_empty",  "aten::resize_",       "aten::set_",
                                             "aten::lift_fresh", "aten::item",          "aten::_local_scalar_dense",
                                             "aten::is_nonzero", "aten::record_stream", "aten::_unsafe_view"};
  const char* name = fn.name();
  for (const char* a : kAllocations)
    if (std::strcmp(name, a) == 0) return true;
  const auto schema = fn.operator_schema();
  if (!schema || schema->returns().empty()) return false;
  const auto* alias = schema->returns().front().alias_info();
  return alias != nullptr && !alias->isWrite();  // a view of an input, or maybe one
}

// A torch op (not htm's own scopes, RECORD_FUNCTION("htm::…"), nor autograd's nodes).
bool is_op(const at::RecordFunction& fn) { return std::strncmp(fn.name(), "aten::", 6) == 0; }

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (!is_op(fn)) return nullptr;
  if (is_read(fn.name())) g_reads.fetch_add(1, std::memory_order_relaxed);
  const bool inside = !t_covered.empty() && t_covered.back();
  const bool counts = !inside && !is_idle(fn);
  if (counts)
    g_launches[std::min(g_phase.load(std::memory_order_relaxed), kPhases - 1)].fetch_add(1, std::memory_order_relaxed);
  t_covered.push_back(inside || counts);
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  if (is_op(fn) && !t_covered.empty()) t_covered.pop_back();
}

}  // namespace

LaunchCount::LaunchCount() {
  if (g_counting.exchange(true)) throw Error("LaunchCount: one at a time");
  g_phase = 0;
  for (auto& n : g_launches) n = 0;
  g_reads = 0;
  g_handle = at::addGlobalCallback(at::RecordFunctionCallback(on_enter, on_exit).scopes({at::RecordScope::FUNCTION}));
}

LaunchCount::~LaunchCount() {
  at::removeCallback(g_handle);
  g_counting = false;
}

int64_t LaunchCount::launches() const {
  int64_t all = 0;
  for (const auto& n : g_launches) all += n.load();
  return all;
}

int64_t LaunchCount::host_reads() const { return g_reads.load(); }

void LaunchCount::next_phase() { g_phase.fetch_add(1); }

std::vector<int64_t> LaunchCount::phases() const {
  std::vector<int64_t> out;
  for (size_t k = 0; k <= std::min(g_phase.load(), kPhases - 1); ++k) out.push_back(g_launches[k].load());
  return out;
}

}  // namespace htm
