// The slides' "importance sampling from replay buffers" (estimator.replay): each step's inputs
// and merge draws are kept, and later steps replay some of them. The model merges the same pairs
// again (ForwardHooks::merges), today's policy scores them, and the replayed rows enter the
// objective weighted by how much likelier today's policy finds that draw than the policy that
// drew it (Estimator::replayed), so the decoder and the policy keep learning from trees the
// current policy would no longer draw.
#pragma once

#include <deque>
#include <optional>
#include <vector>

#include <ATen/core/Generator.h>

#include "htm/dataset.h"
#include "model/model.h"

namespace htm {

/// Rows of one earlier step: its inputs, the schedule it ran and the merges it drew.
struct ReplayedDraw {
  Batch batch;
  std::vector<int64_t> schedule;
  std::vector<MergeDecision> merges;  ///< src, dst per layer run (r = 0 layers: undefined)
  torch::Tensor behaviour;            ///< B: Σ log p of the merges under the policy that drew them
};

/// B: Σ over layers of the merges' log-probabilities in a forward pass (undefined if none).
inline torch::Tensor merge_log_prob(const ForwardResult& out) { return total_log_prob(out, Draw::Kind::merge); }

class ReplayBuffer {
 public:
  explicit ReplayBuffer(int64_t capacity) : capacity_(capacity) {}
  /// Keeps a step's draw (detached), dropping the oldest beyond the capacity. A step without merge
  /// log-probabilities (nothing drawn, or a policy that learns nothing) is not kept.
  void add(const Batch& batch, const std::vector<int64_t>& schedule, const ForwardResult& out);
  /// Up to `rows` rows of one kept step chosen uniformly; nothing while the buffer is empty.
  std::optional<ReplayedDraw> draw(int64_t rows, at::Generator generator) const;
  size_t size() const { return kept_.size(); }

 private:
  int64_t capacity_;
  std::deque<ReplayedDraw> kept_;
};

}  // namespace htm
