// `htm bench`'s timing helpers and GEMM rates (bench.cpp times the training step with them).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "config/settings.h"

namespace htm {
class Backend;
}

namespace htm::bench {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v);
/// Least-squares slope of log y against log x: the exponent of y ∝ x^a.
double fitted_exponent(const std::vector<double>& x, const std::vector<double>& y);
/// The number before `unit` in `text` (0 when absent): reads a child's summary line.
double number_before(const std::string& text, const std::string& unit);

/// Waits for the GPU's queued work, where there is a GPU: a timed call ends when its kernels do.
void synchronize();

/// `repeats` calls of f, each timed to its end (its kernels' too), in milliseconds.
template <class F>
std::vector<double> time_ms(int repeats, F&& f) {
  std::vector<double> ms;
  synchronize();
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

/// The device's own time of each timed call (events recorded on its stream before and after),
/// where the device and the torch can give it: CUDA events with timing, c10::Event::elapsedTime
/// (torch 2.x). Elsewhere, or where the torch refuses, it is unavailable and says why.
class DeviceTimer {
 public:
  explicit DeviceTimer(const c10::Device& device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  void start();
  void stop();
  /// Each call's milliseconds (waits for the last event); empty when unavailable.
  std::vector<double> ms();
  const std::string& unavailable() const { return why_; }

 private:
  struct Events;
  void mark(bool start);  ///< an event on the device's stream, as a step's start or its stop
  std::unique_ptr<Events> events_;
  std::string why_;
};

/// What an op costs here beyond its work, in microseconds: the median over runs of many calls of a
/// 256×16 float sum whose operand wants a gradient (dispatch, an output's allocation, an autograd
/// node), on the CPU, one thread. A small model's "µs an op" over this floor is its ops' own work.
double dispatch_floor_us();

/// GFLOP/s of an n×n×n product: htm::gemm (oneDNN's sgemm, what the model calls), torch::mm in
/// fp32 and in bf16 (oneDNN's bf16 GEMM, on AMX where the CPU has it). Each rate is the median of
/// up to `repeats` calls after one warm-up, timed within about a second: a product that takes
/// longer than that alone (torch's bf16 without bf16 hardware: ~1 GFLOP/s, 16 s at 2048^3) is
/// timed once, its first call, whose warm-up is then a small part of it.
struct GemmRates {
  double htm_fp32 = 0, torch_fp32 = 0, htm_bf16 = 0, torch_bf16 = 0;
  double of(RuntimePrecision p) const { return p == RuntimePrecision::bf16 ? htm_bf16 : htm_fp32; }
};
/// htm's rates are the device's backend's products (Backend::product_into); where it has none of
/// its own (a GPU, a build without the native kernels, runtime.kernels = "portable") the model's
/// products are torch's: htm's rates are torch::mm's.
GemmRates gemm_rates(int64_t n, const c10::Device& device, int repeats = 10);

/// The GEMM rates at 1024³ (with `all_sizes`: 256³ to 2048³), printed; returns the 1024³ rates.
GemmRates print_gemm_rates(bool all_sizes, const c10::Device& device, const Backend& backend, int nthreads);

}  // namespace htm::bench
