// The state a CUDA graph's capture shares with the kernels (kernels/graph_draws.h).
#include "kernels/graph_draws.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace htm {

namespace {

thread_local bool g_graph_draws = false, g_fixed_rounds = false;
thread_local std::vector<GraphFlag> g_flags;
std::atomic<int64_t> g_rounds_cap{0};

}  // namespace

GraphDraws::GraphDraws(bool fixed_rounds) : previous_(g_graph_draws), previous_fixed_(g_fixed_rounds) {
  g_graph_draws = true;
  g_fixed_rounds = fixed_rounds;
}
GraphDraws::~GraphDraws() { g_graph_draws = previous_, g_fixed_rounds = previous_fixed_; }

bool capturing() { return g_graph_draws && g_fixed_rounds; }
bool drawing_as_graph() { return g_graph_draws; }

void raise_graph_flag(GraphFlag flag) { g_flags.push_back(std::move(flag)); }
std::vector<GraphFlag> take_graph_flags() { return std::exchange(g_flags, {}); }

int64_t graph_rounds(int64_t T) {
  const int64_t cap = g_rounds_cap.load(std::memory_order_relaxed);
  return cap > 0 ? std::min(cap, T / 2) : T / 2;
}

void set_graph_rounds_cap(int64_t cap) { g_rounds_cap.store(std::max<int64_t>(0, cap), std::memory_order_relaxed); }

torch::Tensor device_constant(const std::string& what, int64_t n, const torch::Device& device,
                              const std::function<torch::Tensor()>& make) {
  static std::mutex mutex;
  static auto* made = new std::map<std::tuple<std::string, int64_t, std::string>, torch::Tensor>();
  const auto key = std::make_tuple(what, n, device.str());
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto found = made->find(key); found != made->end()) return found->second;
  }
  torch::NoGradGuard no_grad;
  auto value = make();
  if (capturing()) return value;  // made inside a capture: its memory is the graph's, not kept
  std::lock_guard<std::mutex> lock(mutex);
  return made->emplace(key, value).first->second;
}

at::Generator seeded_generator(uint64_t seed, const at::Device& device) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  at::Generator gen = at::globalContext().defaultGenerator(device).clone();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
  return gen;
}

uint64_t next_seed(at::Generator generator) {
  if (generator.device().is_cpu()) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
  }
  // A generator elsewhere (a plugin's own): one draw of it, read back once.
  auto draw = torch::empty({1}, torch::TensorOptions(torch::kLong).device(generator.device()));
  draw.random_(std::numeric_limits<int64_t>::max(), generator);
  return static_cast<uint64_t>(draw.item<int64_t>());
}

}  // namespace htm
