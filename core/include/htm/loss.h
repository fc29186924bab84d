// Loss plugins: objectives and regularisers, weighted and summed by the host.
#pragma once

#include <vector>

#include <torch/nn/module.h>

#include "htm/plugin.h"

namespace htm {

/// Everything a loss may look at after one forward pass.
struct LossContext {
  torch::Tensor input;   ///< the batch as the dataset produced it (B×…)
  torch::Tensor output;  ///< the model's output (reconstruction B×… or logits B×K)
  torch::Tensor labels;  ///< B int64, when the dataset has labels
  /// Token populations, outermost first: encoder_tokens[d] enters encoder layer d+1;
  /// decoder_tokens[d] leaves the decoder layer mirroring it (same count of tokens).
  std::vector<torch::Tensor> encoder_tokens;
  std::vector<torch::Tensor> decoder_tokens;
  int64_t epoch = 0;
  int64_t step = 0;  ///< optimizer steps taken before this one
  bool training = true;
  /// True during a teacher-forced pass (§3.2.2): decoder_tokens[d] is then each layer's own
  /// one-layer reconstruction of encoder_tokens[d], token for token in the same order, and
  /// output is the reconstruction unlifted from the first layer's.
  bool teacher_forced = false;
  /// Teacher-forced pass only, per layer: B×r log-probabilities of the merges chosen and of the
  /// true merged tokens under the unmerge policy (undefined where a policy learns nothing).
  std::vector<torch::Tensor> merge_log_probs;
  std::vector<torch::Tensor> unmerge_log_probs;
};

/// Where the host asks a loss to act on the tokens entering an encoder layer.
struct LayerEntry {
  int64_t depth = 1;  ///< 1-based encoder layer
  int64_t epoch = 0;
  int64_t step = 0;
  bool training = true;
  at::Generator generator;  ///< seeded; every random draw must use it
};

class Loss : public Plugin, public torch::nn::Module {
 public:
  ~Loss() override;
  /// Per-sample loss, B values, in the graph. The host averages it, weights it and uses it as
  /// the policy's reward.
  virtual torch::Tensor per_sample(const LossContext& ctx) = 0;

  /// Optional: rewrites the B×T×C tokens entering each encoder layer (after the depth signal)
  /// before anything reads them — e.g. adds noise to limit their capacity (§3.2.1).
  virtual torch::Tensor enter_layer(const torch::Tensor& tokens, const LayerEntry&) { return tokens; }

  /// Optional: the first N training steps are a teacher-forced pre-training stage (§3.2.2):
  /// the host runs the teacher-forced pass instead of the ordinary one and sets
  /// LossContext::teacher_forced. 0: no such stage.
  virtual int64_t teacher_forced_steps() const { return 0; }

  /// Optional: true where per_sample() or enter_layer() change with the step or the epoch of
  /// LossContext or LayerEntry (a schedule). A step replayed from a CUDA graph (runtime.cuda_graph) repeats
  /// the arithmetic it captured, the step's values baked in: a run with such a loss steps eagerly.
  virtual bool varies_with_step() const { return false; }
};

}  // namespace htm
