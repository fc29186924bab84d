// What a training pass is scored by: the experiment's weighted losses, per sample, with the
// multi-resolution ("anytime") loss's reconstructions from the intermediate populations
// (ForwardResult::levels, which a pass makes when ForwardHooks::levels asks); and the losses'
// hooks into the encoder.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"
#include "store/metric.h"
#include "train/experiment.h"

namespace htm {

/// A metric whose value is still a scalar tensor (on the device where the pass ran): read once
/// the step is read, so a step replayed from a CUDA graph reads its metrics after the replay.
struct PendingMetric {
  std::string name;
  torch::Tensor value;
};

/// The values of `pending`, read (`.item()`), in order.
std::vector<Metric> read_metrics(const std::vector<PendingMetric>& pending);

/// The losses' enter_layer() calls (capacity's noise, …) as a pass's ForwardHooks::layer_entry,
/// drawing from `generator`.
ForwardHooks loss_hooks(std::vector<WeightedLoss>& losses, int64_t epoch, int64_t step, bool training,
                        at::Generator generator);

/// The weighted sum of the experiment's losses for one forward pass, per sample (B). Each
/// term's batch mean is appended to `terms` as "loss/<name>" when given (not yet read). With the
/// intermediate populations' reconstructions (ForwardResult::levels) and an `anytime` weight w > 0,
/// the multi-resolution loss L_D + w · mean_d L_d, where L_d is the same sum for the
/// reconstruction from level d given as the output alone (terms on the populations, such as
/// sinkhorn's, count once, in L_D); mean_d L_d is appended as "loss/anytime".
torch::Tensor training_objective(const std::vector<WeightedLoss>& losses, const ForwardResult& out, const Batch& batch,
                                 int64_t epoch, int64_t step, bool training, bool teacher_forced,
                                 std::vector<PendingMetric>* terms = nullptr, double anytime = 0);

}  // namespace htm
