// An experiment assembled from a resolved config: its dataset, the model built from the
// chosen plugins, and the weighted losses. Used by `htm run`, `htm bench`, `htm sample`, tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/experiment_config.h"
#include "htm/dataset.h"
#include "htm/loss.h"
#include "model/model.h"
#include "train/estimator/value_heads.h"

namespace htm {

struct WeightedLoss {
  std::string name;
  double weight;
  std::shared_ptr<Loss> loss;
};

struct Experiment {
  ResolvedConfig config;
  std::shared_ptr<Dataset> dataset;
  std::shared_ptr<Model> model;
  std::vector<WeightedLoss> losses;
  /// The value baseline's heads (estimator.baseline = "value"), registered in the model as
  /// `value` (its optimiser and checkpoint hold them); null otherwise.
  ValueHeads values{nullptr};
  std::vector<int64_t> schedule;  ///< the full merging schedule (empty for a ViT)
  int64_t parameters = 0;         ///< every parameter of the model and its plugins
  int64_t participating = 0;      ///< those a training step updates (participating_parameters)
  int64_t latent_floats = 0;      ///< floats at an autoencoder's bottleneck (tokens × width); 0: none
  /// train.eval_policies, built at their defaults: evaluation also runs the same weights under each.
  std::vector<std::pair<std::string, std::shared_ptr<Policy>>> eval_policies;
  /// estimator.baseline_policy, built at its defaults: a training step's reference pass (null: none).
  std::shared_ptr<Policy> baseline_policy;
  /// Where the model lives (runtime.device); batches go there with on_device().
  c10::Device device{c10::DeviceType::CPU};
};

/// A batch's tensors on `device` (unchanged, not copied, where they are there already).
Batch on_device(Batch batch, const c10::Device& device);

/// Builds dataset, adapter, policy, merge operator, losses and the model of one resolved config.
/// Seeds torch's global generator with `seed` first, so initial weights depend on it alone.
/// Throws htm::Error for combinations that cannot work (a vit that does not classify, ...).
/// The model and its policies are then placed on runtime.device (a bare "cuda": the GPU of
/// `local_rank`, data-parallel).
Experiment assemble(const ResolvedConfig& config, const PluginFactory& plugins, int64_t seed, int local_rank = 0);

/// A count a setting asks for (train.train_samples, eval_samples, max_steps; 0: all) within
/// what there is.
inline int64_t samples_limit(int64_t requested, int64_t available) {
  return requested > 0 ? std::min(requested, available) : available;
}

/// The cores this process may use: OMP_NUM_THREADS where it is set to a positive count (as
/// torch itself reads it), otherwise every core the machine has.
int64_t usable_cores();

/// Threads for torch: `threads`, or usable_cores() when it is 0.
void set_threads(int64_t threads);

/// Puts runtime.kernels in force for the SDK's kernels (kernels/kernels.h), and whether they
/// recompute the MLPs' hidden activations (runtime.recompute = "mlp": kernels/fused_linear.h).
void use_kernels(RuntimeKernels kernels, RuntimeRecompute recompute = RuntimeRecompute::off);

/// Puts runtime.precision in force for the SDK's matrix products (kernels/precision.h). bf16 on a
/// CPU without bf16 instructions falls back to fp32 with a note on stderr (once); on a GPU it
/// stays. Returns the precision in force.
RuntimePrecision set_precision(RuntimePrecision asked, const std::string& device = "cpu");

/// Puts a run's [runtime] in force, the one place every command does it (htm run, bench, sample):
/// `threads` torch threads (the caller's count: runtime.threads, or a rank's share), the kernels
/// and recomputation, a captured sampler's rounds and the precision. Returns the precision in
/// force (fp32 where bf16 was asked of a CPU without it).
RuntimePrecision use_runtime(const RuntimeSettings& runtime, int64_t threads);

}  // namespace htm
