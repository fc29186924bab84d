// Reducing the capacity of tokens (paper §3.2.1): unit Gaussian noise added to the tokens at each
// encoder layer's entry (eq. 5) and λ‖x'‖² on the noised tokens (eq. 6, λ = this loss's weight),
// a VAE with fixed unit variance. A schedule gives the capacity back as training goes on.
#include <algorithm>

#include <torch/torch.h>

#include "htm/loss.h"
#include "htm/row_shard.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"capacity",
          htm::PluginKind::loss,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Unit Gaussian noise on the tokens entering each encoder layer plus weight * |x'|^2, "
          "released linearly over a step window; paper §3.2.1",
          {{"noise", ValueType::floating, 1.0, "standard deviation of the noise (paper: 1)"},
           {"release_start", ValueType::integer, int64_t{0},
            "step at which capacity starts coming back; with release_steps = 0 it never does"},
           {"release_steps", ValueType::integer, int64_t{0}, "steps over which noise and penalty fall linearly to 0"}}};
}

class CapacityLoss : public htm::Loss {
 public:
  CapacityLoss(const htm::Params& params, const htm::BuildContext&)
      : noise_(params.number("noise")),
        release_start_(params.integer("release_start")),
        release_steps_(params.integer("release_steps")) {
    if (noise_ < 0) throw htm::Error("noise must be non-negative");
    if (release_start_ < 0 || release_steps_ < 0)
      throw htm::Error("release_start and release_steps must be non-negative");
  }

  /// 1 until release_start, then linearly down to 0 over release_steps (stays 1 if that is 0).
  double strength(int64_t step) const {
    if (release_steps_ == 0 || step < release_start_) return 1.0;
    return std::max(0.0, 1.0 - static_cast<double>(step - release_start_) / release_steps_);
  }

  // The release schedule changes the strength from step to step (runtime.cuda_graph steps eagerly).
  bool varies_with_step() const override { return release_steps_ > 0; }

  // Noise only while training: evaluation measures the model with its full capacity.
  torch::Tensor enter_layer(const torch::Tensor& tokens, const htm::LayerEntry& e) override {
    const double sd = noise_ * strength(e.step);
    if (!e.training || sd == 0) return tokens;
    return tokens + sd * htm::normal_like_rows(tokens, e.generator);
  }

  // Mean over layers and tokens of the noised tokens' squared norm per feature (|x'|² / C, so
  // the weight does not depend on the width).
  torch::Tensor per_sample(const htm::LossContext& ctx) override {
    const int64_t B = ctx.input.size(0);
    if (ctx.encoder_tokens.empty() || !ctx.training) return ctx.input.new_zeros({B});
    torch::Tensor total;
    for (const auto& x : ctx.encoder_tokens) {
      auto value = x.pow(2).mean({1, 2});
      total = total.defined() ? total + value : value;
    }
    return strength(ctx.step) * total / static_cast<double>(ctx.encoder_tokens.size());
  }

 private:
  double noise_;
  int64_t release_start_, release_steps_;
};

}  // namespace

HTM_REGISTER_PLUGIN(CapacityLoss, manifest)
