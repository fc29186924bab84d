// Teacher forcing (paper §3.2.2): a pre-training stage in which every encoder layer's r merges
// are unmerged at once by the mirroring decoder layer and scored token by token. The merge
// decisions are trained by REINFORCE with that layer's token-wise error as the reward; the
// unmerge policy, which does not choose during the stage, by cross-entropy on the true merges.
#include <torch/torch.h>

#include "htm/loss.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"teacher_forcing",
          htm::PluginKind::loss,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Teacher-forced pre-training stage: per-layer token-wise MSE, REINFORCE for merges with "
          "it as reward, cross-entropy of the unmerge policy on the true merges; paper §3.2.2",
          {{"steps", ValueType::integer, int64_t{100}, "length of the pre-training stage, in steps"},
           {"unmerge_weight", ValueType::floating, 1.0, "weight of the unmerge cross-entropy"}}};
}

class TeacherForcingLoss : public htm::Loss {
 public:
  TeacherForcingLoss(const htm::Params& params, const htm::BuildContext&)
      : steps_(params.integer("steps")), unmerge_weight_(params.number("unmerge_weight")) {
    if (steps_ < 0) throw htm::Error("steps must be non-negative");
  }

  int64_t teacher_forced_steps() const override { return steps_; }

  // Per layer d: R_d = mean over tokens of |decoded − encoder token|² (the encoder's tokens are
  // the fixed target). Returned: Σ_d R_d + unmerge_weight · CE_d, plus sg[R_d]·(log p − sg[log p])
  // for the merges, which adds the REINFORCE gradient and nothing to the value.
  torch::Tensor per_sample(const htm::LossContext& ctx) override {
    const int64_t B = ctx.input.size(0);
    if (!ctx.teacher_forced) return ctx.input.new_zeros({B});
    torch::Tensor total = ctx.input.new_zeros({B});
    for (size_t d = 0; d < ctx.encoder_tokens.size(); ++d) {
      auto reward = (ctx.decoder_tokens[d] - ctx.encoder_tokens[d].detach()).pow(2).mean({1, 2});
      total = total + reward;
      if (d < ctx.merge_log_probs.size() && ctx.merge_log_probs[d].defined()) {
        auto lp = ctx.merge_log_probs[d].sum(1);
        total = total + reward.detach() * (lp - lp.detach());
      }
      if (d < ctx.unmerge_log_probs.size() && ctx.unmerge_log_probs[d].defined())
        total = total - unmerge_weight_ * ctx.unmerge_log_probs[d].mean(1);
    }
    return total;
  }

 private:
  int64_t steps_;
  double unmerge_weight_;
};

}  // namespace

HTM_REGISTER_PLUGIN(TeacherForcingLoss, manifest)
