#include "train/objective.h"

#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "htm/error.h"

namespace htm {

std::vector<Metric> read_metrics(const std::vector<PendingMetric>& pending) {
  std::vector<Metric> out;
  for (const auto& p : pending) out.push_back({p.name, p.value.item<double>()});
  return out;
}

ForwardHooks loss_hooks(std::vector<WeightedLoss>& losses, int64_t epoch, int64_t step, bool training,
                        at::Generator generator) {
  ForwardHooks h;
  h.layer_entry = [&losses, epoch, step, training, generator](const torch::Tensor& tokens, int64_t depth) {
    LayerEntry entry{depth, epoch, step, training, generator};
    auto x = tokens;
    for (auto& term : losses) {
      PluginScope scope(PluginKind::loss, term.loss.get(), "enter_layer");
      x = term.loss->enter_layer(x, entry);
    }
    return x;
  };
  return h;
}

torch::Tensor training_objective(const std::vector<WeightedLoss>& losses, const ForwardResult& out, const Batch& batch,
                                 int64_t epoch, int64_t step, bool training, bool teacher_forced,
                                 std::vector<PendingMetric>* terms, double anytime) {
  LossContext ctx;
  ctx.input = batch.input;
  ctx.output = out.output;
  ctx.labels = batch.labels;
  ctx.encoder_tokens = out.encoder_tokens;
  ctx.decoder_tokens = out.decoder_tokens;
  ctx.epoch = epoch;
  ctx.step = step;
  ctx.training = training;
  ctx.teacher_forced = teacher_forced;
  if (teacher_forced) {
    for (const auto& m : out.merges) ctx.merge_log_probs.push_back(m.log_prob);
    ctx.unmerge_log_probs = out.unmerge_log_probs;
  }
  torch::Tensor total;
  for (const auto& term : losses) {
    if (term.weight == 0) continue;
    PluginScope scope(PluginKind::loss, term.loss.get(), "per_sample");
    auto value = term.loss->per_sample(ctx);
    if (!value.defined() || value.dim() != 1 || value.size(0) != batch.input.size(0))
      throw Error("its per_sample() returned " +
                  (value.defined() ? "shape " + c10::str(value.sizes()) : std::string("nothing")) +
                  ", expected one value per sample");
    if (terms != nullptr) terms->push_back({"loss/" + term.name, value.mean().detach()});
    total = total.defined() ? total + term.weight * value : term.weight * value;
  }
  if (!total.defined()) throw Error("no loss has a non-zero weight");
  if (anytime <= 0 || out.levels.empty()) return total;  // B
  torch::Tensor levels = torch::zeros_like(total);
  for (const auto& level_output : out.levels) {
    ForwardResult level;  // the output alone: token-level terms (sinkhorn, capacity) count once, in L_D
    level.output = level_output;
    levels = levels + training_objective(losses, level, batch, epoch, step, training, false);
  }
  levels = levels / static_cast<double>(out.levels.size());
  if (terms != nullptr) terms->push_back({"loss/anytime", levels.mean().detach()});
  return total + anytime * levels;  // B
}

}  // namespace htm
