#include "train/schedules.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

namespace htm {

int64_t sample_depth(double rho, int64_t layers, at::Generator generator) {
  // P(d) ∝ ρ^d on 1..L, drawn by inverting the cumulative distribution.
  std::vector<double> weight(layers);
  double total = 0;
  for (int64_t d = 1; d <= layers; ++d) total += (weight[d - 1] = std::pow(rho, d));
  if (!(total > 0)) return 1;
  double u = torch::rand({1}, generator, torch::kDouble).item<double>() * total;
  for (int64_t d = 1; d <= layers; ++d)
    if ((u -= weight[d - 1]) < 0) return d;
  return layers;
}

double rho_at(double rho0, double rho_step, int64_t epoch) {
  return std::min(1.0, rho0 + rho_step * static_cast<double>(epoch));
}

double rho_ramp_at(double rho0, double rho_end, double ramp, int64_t step, int64_t total_steps) {
  const double length = ramp * static_cast<double>(total_steps);
  const double t = length > 0 ? std::min(1.0, static_cast<double>(step) / length) : 1.0;
  return rho0 + (rho_end - rho0) * t;
}

double rho_for(const TrainSettings& train, int64_t step, int64_t epoch, int64_t total_steps) {
  if (train.rho_schedule == RhoSchedule::step)
    return rho_ramp_at(train.rho0, train.rho_end, train.rho_ramp, step, total_steps);
  return rho_at(train.rho0, train.rho_step, epoch);
}

double lr_at(const TrainSettings& train, int64_t step, int64_t epoch, int64_t total_steps) {
  double lr = train.lr;
  const int64_t warmup = train.warmup_steps;
  if (train.lr_schedule == LrDecay::cosine) {
    const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup));
    const double t = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
    lr *= 0.5 * (1 + std::cos(M_PI * t));
  } else {
    for (int64_t e : train.lr_decay_epochs)
      if (e > 0 && e <= epoch) lr *= train.lr_decay_factor;
  }
  if (step < warmup) lr *= static_cast<double>(step + 1) / static_cast<double>(warmup + 1);
  return lr;
}

}  // namespace htm
