#include "train/estimator/replay.h"

#include <torch/torch.h>

namespace htm {
namespace {

Batch rows_of(const Batch& batch, int64_t first, int64_t rows) {
  auto part = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(0, first, rows) : t; };
  return {part(batch.input), part(batch.labels), part(batch.tree)};
}

}  // namespace

void ReplayBuffer::add(const Batch& batch, const std::vector<int64_t>& schedule, const ForwardResult& out) {
  ReplayedDraw draw{{}, schedule, {}, {}};
  auto keep = [](const torch::Tensor& t) { return t.defined() ? t.detach().clone() : t; };
  draw.batch = {keep(batch.input), keep(batch.labels), keep(batch.tree)};
  for (const MergeDecision& m : out.merges) {
    if (m.src.defined() && !m.log_prob.defined()) return;  // nothing to weigh a replay by
    draw.merges.push_back({keep(m.src), keep(m.dst), {}, {}});
  }
  draw.behaviour = merge_log_prob(out);
  if (!draw.behaviour.defined()) return;
  draw.behaviour = draw.behaviour.detach();
  kept_.push_back(std::move(draw));
  if (static_cast<int64_t>(kept_.size()) > capacity_) kept_.pop_front();
}

std::optional<ReplayedDraw> ReplayBuffer::draw(int64_t rows, at::Generator generator) const {
  if (kept_.empty() || rows <= 0) return std::nullopt;
  const auto pick = torch::randint(static_cast<int64_t>(kept_.size()), {1}, generator, torch::kLong).item<int64_t>();
  const ReplayedDraw& step = kept_[static_cast<size_t>(pick)];
  const int64_t B = step.batch.input.size(0);
  const int64_t first = rows >= B ? 0 : torch::randint(B - rows + 1, {1}, generator, torch::kLong).item<int64_t>();
  const int64_t n = std::min(rows, B);
  ReplayedDraw out{rows_of(step.batch, first, n), step.schedule, {}, step.behaviour.narrow(0, first, n)};
  for (const MergeDecision& m : step.merges)
    out.merges.push_back({m.src.defined() ? m.src.narrow(0, first, n) : m.src,
                          m.dst.defined() ? m.dst.narrow(0, first, n) : m.dst,
                          {},
                          {}});
  return out;
}

}  // namespace htm
