// MemoryCensus (memory_census.h): a memory reporter installed as the thread's profiler state
// (the allocators report each allocation and free to it, with its pointer), and a RecordFunction
// callback that keeps each thread's open scopes, so an allocation is named by what made it.
#include "train/memory_census.h"

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "htm/error.h"

namespace htm {

struct MemoryCensus::State {
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::mutex mutex;
  struct Block {
    int64_t bytes;
    int site;
    int64_t serial;  // which allocation: an address is used again once freed
  };
  std::unordered_map<void*, Block> live;
  std::map<std::string, int> site_of;
  std::vector<std::string> sites;
  int64_t live_bytes = 0, freed_earlier = 0, peak_bytes = 0, snapshot_bytes = -1, serials = 0;
  int phase = 0;
  // At the last peak taken: the live allocations, the earlier bytes freed by then, and the phase.
  std::vector<std::pair<void*, Block>> snapshot;
  int64_t snapshot_freed_earlier = 0;
  int snapshot_phase = 0;

  int site(const std::string& where) {
    auto [it, added] = site_of.emplace(where, static_cast<int>(sites.size()));
    if (added) sites.push_back(where);
    return it->second;
  }
  int64_t net() const { return live_bytes - freed_earlier; }
  void take_snapshot() {
    snapshot.assign(live.begin(), live.end());
    snapshot_bytes = net();
    snapshot_freed_earlier = freed_earlier;
    snapshot_phase = phase;
  }
};

namespace {

std::atomic<bool> g_active{false};

// Each thread's open scopes: htm's, autograd's nodes, torch ops.
thread_local std::vector<std::string> t_scopes;

std::string where_now() {
  std::string htm_scope = "(outside htm's scopes)", node, op;
  for (const auto& s : t_scopes) {
    if (s.rfind("htm::", 0) == 0)
      htm_scope = s;
    else if (s.rfind("autograd::engine::evaluate_function: ", 0) == 0)
      node = s.substr(std::strlen("autograd::engine::evaluate_function: "));
    else if (op.empty() && s.rfind("aten::", 0) == 0)
      op = s;
  }
  std::string where = htm_scope;
  if (!node.empty()) where += " " + node;
  if (!op.empty()) where += " " + op;
  return where;
}

std::unique_ptr<at::ObserverContext> scope_opened(const at::RecordFunction& fn) {
  t_scopes.emplace_back(fn.name());
  return nullptr;
}

void scope_closed(const at::RecordFunction&, at::ObserverContext*) {
  if (!t_scopes.empty()) t_scopes.pop_back();
}

class Reporter : public c10::MemoryReportingInfoBase {
 public:
  explicit Reporter(std::shared_ptr<MemoryCensus::State> state) : state_(std::move(state)) {}
  // The totals are int64_t in torch 1.13 and size_t in later torches: one of the two overrides
  // the allocator's call, whichever the linked torch declares.
  void reportMemoryUsage(void* ptr, int64_t bytes, int64_t, int64_t, c10::Device device) { report(ptr, bytes, device); }
  void reportMemoryUsage(void* ptr, int64_t bytes, size_t, size_t, c10::Device device) { report(ptr, bytes, device); }
  void report(void* ptr, int64_t bytes, const c10::Device& device) {
    if (device != state_->device) return;
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (bytes > 0) {
      state_->live[ptr] = {bytes, state_->site(where_now()), state_->serials++};
      state_->live_bytes += bytes;
      state_->peak_bytes = std::max(state_->peak_bytes, state_->net());
      if (state_->net() >= state_->snapshot_bytes + (int64_t{1} << 20)) state_->take_snapshot();
    } else if (auto found = state_->live.find(ptr); found != state_->live.end()) {
      state_->live_bytes -= found->second.bytes;
      state_->live.erase(found);
    } else {
      state_->freed_earlier -= bytes;  // made before the census began
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

 private:
  std::shared_ptr<MemoryCensus::State> state_;
};

}  // namespace

// The callback and the reporter, for the census's life (the guard on the thread that made it).
struct MemoryCensus::Installed {
  at::CallbackHandle callback = 0;
  std::unique_ptr<c10::DebugInfoGuard> guard;
};

MemoryCensus::MemoryCensus(const std::string& device)
    : state_(std::make_shared<State>()), installed_(std::make_unique<Installed>()) {
  if (g_active.exchange(true)) throw Error("MemoryCensus: one at a time");
  state_->device = c10::Device(device);
  installed_->callback = at::addGlobalCallback(at::RecordFunctionCallback(scope_opened, scope_closed));
  installed_->guard =
      std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<Reporter>(state_));
}

MemoryCensus::~MemoryCensus() {
  installed_->guard.reset();
  at::removeCallback(installed_->callback);
  g_active = false;
}

int64_t MemoryCensus::live_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->live_bytes;
}

int64_t MemoryCensus::peak_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->peak_bytes;
}

int64_t MemoryCensus::freed_earlier_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->freed_earlier;
}

std::vector<MemoryCensus::Site> MemoryCensus::at_peak() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<int64_t> by_site(state_->sites.size(), 0);
  for (const auto& [ptr, block] : state_->snapshot) by_site[block.site] += block.bytes;
  std::vector<Site> out;
  for (size_t i = 0; i < by_site.size(); ++i)
    if (by_site[i] > 0) out.push_back({state_->sites[i], by_site[i]});
  std::sort(out.begin(), out.end(), [](const Site& a, const Site& b) { return a.bytes > b.bytes; });
  return out;
}

int64_t MemoryCensus::freed_earlier_at_peak() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->snapshot_freed_earlier;
}

int MemoryCensus::phase_at_peak() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->snapshot_phase;
}

int64_t MemoryCensus::at_peak_among(const std::vector<const void*>& among) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::unordered_set<int64_t> wanted;  // the allocations alive now at those addresses
  for (const void* ptr : among)
    if (auto found = state_->live.find(const_cast<void*>(ptr)); found != state_->live.end())
      wanted.insert(found->second.serial);
  int64_t bytes = 0;
  for (const auto& [ptr, block] : state_->snapshot)
    if (wanted.count(block.serial) > 0) bytes += block.bytes;
  return bytes;
}

void MemoryCensus::next_phase() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  ++state_->phase;
}

}  // namespace htm
