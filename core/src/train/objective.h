// What a training pass is scored by: the experiment's weighted losses, per sample, with the
// multi-resolution ("anytime") loss's reconstructions from the intermediate populations, which
// this side asks the model for (AnytimeLevels); and the losses' hooks into the encoder.
#pragma once

#include <vector>

#include "model/model.h"
#include "store/metric.h"
#include "train/experiment.h"

namespace htm {

/// The losses' enter_layer() calls (capacity's noise, …) as a pass's ForwardHooks::layer_entry,
/// drawing from `generator`.
ForwardHooks loss_hooks(std::vector<WeightedLoss>& losses, int64_t epoch, int64_t step, bool training,
                        at::Generator generator);

/// The anytime loss's reconstructions (train.anytime): set as a training pass's
/// ForwardHooks::decoded, it asks the model to reconstruct the input from the population after
/// each encoder layer d = 1…D−1 (HtmModelImpl::reconstruct_level), before the pass unlifts its
/// own output; their unmerge draws join the pass's draws. Nothing for a model without a decoder.
class AnytimeLevels {
 public:
  AnytimeLevels(Model& model, const std::vector<int64_t>& schedule, at::Generator generator);
  /// Sets hooks.decoded for the next pass (and forgets the last pass's reconstructions).
  void watch(ForwardHooks& hooks);
  /// [d−1]: the reconstruction from level d, after the pass.
  const std::vector<torch::Tensor>& outputs() const { return outputs_; }

 private:
  HtmModelImpl* model_;
  std::vector<int64_t> schedule_;
  at::Generator generator_;
  std::vector<torch::Tensor> outputs_;
};

/// The weighted sum of the experiment's losses for one forward pass, per sample (B). Each
/// term's batch mean is appended to `terms` as "loss/<name>" when given. With the intermediate
/// populations' reconstructions (`level_outputs`, AnytimeLevels) and an `anytime` weight w > 0,
/// the multi-resolution loss L_D + w · mean_d L_d, where L_d is the same sum for the
/// reconstruction from level d given as the output alone (terms on the populations, such as
/// sinkhorn's, count once, in L_D); mean_d L_d is appended as "loss/anytime".
torch::Tensor training_objective(const std::vector<WeightedLoss>& losses, const ForwardResult& out, const Batch& batch,
                                 int64_t epoch, int64_t step, bool training, bool teacher_forced,
                                 std::vector<Metric>* terms = nullptr, double anytime = 0,
                                 const std::vector<torch::Tensor>& level_outputs = {});

}  // namespace htm
