#include "commands/bench_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

#include "config/device.h"
#include "htm/error.h"
#include "kernels/backend.h"

namespace htm::bench {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Least-squares slope of log y against log x: the exponent of y ∝ x^a.
double fitted_exponent(const std::vector<double>& x, const std::vector<double>& y) {
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += std::log(x[i]) / x.size(), my += std::log(y[i]) / y.size();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (std::log(x[i]) - mx) * (std::log(y[i]) - my);
    den += (std::log(x[i]) - mx) * (std::log(x[i]) - mx);
  }
  return num / den;
}

// The number before `unit` in `text` (0 when absent): reads a child's summary line.
double number_before(const std::string& text, const std::string& unit) {
  const size_t at = text.find(unit);
  if (at == std::string::npos || at == 0) return 0;
  const size_t end = text.find_last_not_of(' ', at - 1);
  const size_t begin = text.rfind(' ', end) + 1;
  return std::atof(text.substr(begin, end + 1 - begin).c_str());
}

// Waits for the GPU's queued work, where there is a GPU: a timed call ends when its kernels do.
void synchronize() {
  static const bool cuda = cuda_usable();
  if (cuda) torch::cuda::synchronize();
}

namespace {

constexpr const char* kNoEventTiming = "this torch's events cannot time (c10::Event::elapsedTime: torch 2.x)";

// Whether this torch's c10::Event can tell the time between two (torch 2.x).
template <class E, class = void>
struct HasElapsedTime : std::false_type {};
template <class E>
struct HasElapsedTime<E, std::void_t<decltype(std::declval<const E&>().elapsedTime(std::declval<const E&>()))>>
    : std::true_type {};

template <class E>
double elapsed_ms(const E& from, const E& to) {
  if constexpr (HasElapsedTime<E>::value)
    return from.elapsedTime(to);
  else
    throw Error(kNoEventTiming);
}

}  // namespace

struct DeviceTimer::Events {
  c10::Device device;
  std::vector<c10::Event> starts, stops;
  c10::Event mark() {
    c10::Event e(device.type(), c10::EventFlag::BACKEND_DEFAULT);  // CUDA: timing on
    e.record(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
    return e;
  }
};

DeviceTimer::DeviceTimer(const c10::Device& device) {
  if (!device.is_cuda()) {
    why_ = "not on a GPU";
    return;
  }
  if (!HasElapsedTime<c10::Event>::value) {
    why_ = kNoEventTiming;
    return;
  }
  events_ = std::make_unique<Events>(Events{device, {}, {}});
}

DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::start() { mark(true); }
void DeviceTimer::stop() { mark(false); }

void DeviceTimer::mark(bool start) {
  if (!events_) return;
  try {
    (start ? events_->starts : events_->stops).push_back(events_->mark());
  } catch (const std::exception& e) {
    why_ = e.what(), events_.reset();
  }
}

std::vector<double> DeviceTimer::ms() {
  std::vector<double> out;
  if (!events_) return out;
  try {
    synchronize();  // every event recorded has happened
    for (size_t i = 0; i < std::min(events_->starts.size(), events_->stops.size()); ++i)
      out.push_back(elapsed_ms(events_->starts[i], events_->stops[i]));
  } catch (const std::exception& e) {
    why_ = e.what(), events_.reset();
    out.clear();
  }
  return out;
}

double dispatch_floor_us() {
  const auto a = torch::randn({256, 16}).requires_grad_(), b = torch::randn({256, 16});
  constexpr int kCalls = 2000;
  torch::Tensor sum;
  const auto runs = time_ms(9, [&] {
    for (int i = 0; i < kCalls; ++i) sum = a + b;
  });
  return median(runs) * 1000.0 / kCalls;
}

GemmRates gemm_rates(int64_t n, const c10::Device& device, int repeats) {
  const auto on = torch::TensorOptions().device(device);
  auto a = torch::randn({n, n}, on), b = torch::randn({n, n}, on), c = torch::empty({n, n}, on);
  const double flop = 2.0 * n * n * n;
  auto rate = [&](auto&& f) {
    constexpr double budget_ms = 1000;
    const double first = median(time_ms(1, f));
    if (first >= budget_ms) return flop / first / 1e6;
    std::vector<double> ms;
    double spent = 0;
    while (static_cast<int>(ms.size()) < repeats && (ms.size() < 3 || spent < budget_ms)) {
      ms.push_back(time_ms(1, f)[0]);
      spent += ms.back();
    }
    return flop / median(ms) / 1e6;
  };
  GemmRates r;
  r.torch_fp32 = rate([&] { torch::mm_out(c, a, b); });
  auto a16 = a.to(torch::kBFloat16), b16 = b.to(torch::kBFloat16);
  r.torch_bf16 = rate([&] { torch::mm(a16, b16); });
  r.htm_fp32 = r.torch_fp32;
  r.htm_bf16 = r.torch_bf16;
  const Backend& backend = backend_for(a);
  if (backend.own_products()) {
    r.htm_fp32 = rate([&] { backend.product_into(c, a, b); });
    try {  // oneDNN has no bf16 GEMM below AVX-512 (status 3, unimplemented): no rate there
      r.htm_bf16 = rate([&] { backend.product_into(c, a16, b16); });
    } catch (const Error&) {
      r.htm_bf16 = std::nan("");
    }
  }
  return r;
}

GemmRates print_gemm_rates(bool all_sizes, const c10::Device& device, const Backend& backend, int nthreads) {
  GemmRates peak;
  for (int64_t n : all_sizes ? std::vector<int64_t>{256, 512, 1024, 2048} : std::vector<int64_t>{1024}) {
    const GemmRates g = gemm_rates(n, device);
    if (backend.own_products()) {
      char bf16[64] = "none on this CPU";
      if (!std::isnan(g.htm_bf16)) std::snprintf(bf16, sizeof bf16, "%.1f GFLOP/s", g.htm_bf16);
      std::printf(
          "gemm     %lld^3 at %d thread%s: fp32 htm::gemm (%s backend) %.1f GFLOP/s, torch::mm %.1f GFLOP/s;"
          " bf16 htm::gemm (%s backend, fp32 accumulation) %s, torch::mm %.1f GFLOP/s\n",
          (long long)n, nthreads, nthreads == 1 ? "" : "s", backend.name(), g.htm_fp32, g.torch_fp32, backend.name(),
          bf16, g.torch_bf16);
    } else {
      // a backend without products of its own multiplies with torch's
      std::printf("gemm     %lld^3 on %s (%s backend): torch::mm fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s\n", (long long)n,
                  device.str().c_str(), backend.name(), g.torch_fp32, g.torch_bf16);
    }
    if (n == 1024) peak = g;
  }
  return peak;
}

}  // namespace htm::bench
