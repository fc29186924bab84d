// The schedules of a run: the learning rate over steps, ρ of the stochastic merging schedule
// (paper §3.1.4) and the depth it draws.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Generator.h>

#include "config/settings.h"

namespace htm {

/// Draws the depth d ∈ {1..layers} with P(d) ∝ ρ^d (paper §3.1.4).
int64_t sample_depth(double rho, int64_t layers, at::Generator generator);
/// ρ at an epoch: min(1, ρ₀ + epoch·step).
double rho_at(double rho0, double rho_step, int64_t epoch);
/// ρ at `step` of a linear ramp from ρ₀ to ρ_end over the first `ramp` fraction of `total_steps`.
double rho_ramp_at(double rho0, double rho_end, double ramp, int64_t step, int64_t total_steps);

/// The learning rate for 0-based `step`, in `epoch`, of a run of `total_steps`: train.lr with
/// a linear warm-up over train.warmup_steps, then the paper's step decay at
/// train.lr_decay_epochs or a cosine decay to 0 at the last step.
double lr_at(const TrainSettings& train, int64_t step, int64_t epoch, int64_t total_steps);
/// ρ for `step` in `epoch`: the paper's per-epoch rise, or a linear per-step ramp.
double rho_for(const TrainSettings& train, int64_t step, int64_t epoch, int64_t total_steps);

}  // namespace htm
