// Sinkhorn distance between matching encoder and decoder token populations (paper §3.2.2): an
// auxiliary term pulling each decoder layer's set of tokens towards the set the mirroring
// encoder layer saw, without caring about their order.
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "htm/loss.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"sinkhorn",
          htm::PluginKind::loss,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Entropic optimal-transport (Sinkhorn) distance between each encoder token population "
          "and the decoder population mirroring it; paper §3.2.2",
          {{"epsilon", ValueType::floating, 0.05, "entropic regularisation, as a fraction of the mean transport cost"},
           {"iterations", ValueType::integer, int64_t{50}, "Sinkhorn iterations"},
           {"detach_encoder", ValueType::boolean, true,
            "treat the encoder's populations as fixed targets (the decoder moves to them)"}}};
}

class SinkhornLoss : public htm::Loss {
 public:
  SinkhornLoss(const htm::Params& params, const htm::BuildContext&)
      : epsilon_(params.number("epsilon")),
        iterations_(params.integer("iterations")),
        detach_encoder_(params.flag("detach_encoder")) {
    if (!(epsilon_ > 0)) throw htm::Error("epsilon must be positive");
    if (iterations_ < 1) throw htm::Error("iterations must be at least 1");
  }

  torch::Tensor per_sample(const htm::LossContext& ctx) override {
    const int64_t B = ctx.input.size(0);
    const size_t layers = std::min(ctx.encoder_tokens.size(), ctx.decoder_tokens.size());
    if (layers == 0) return ctx.input.new_zeros({B});
    torch::Tensor total;
    for (size_t d = 0; d < layers; ++d) {
      auto a = ctx.encoder_tokens[d], b = ctx.decoder_tokens[d];
      if (detach_encoder_) a = a.detach();
      auto value = distance(a, b);
      total = total.defined() ? total + value : value;
    }
    return total / static_cast<double>(layers);
  }

  /// <P, M> for B pairs of equal-weight populations a, b (B×T×C), M_ij = |a_i − b_j|² / C and
  /// P the entropic transport plan, found by log-domain Sinkhorn iterations outside the graph.
  /// The gradient flows through M with P held fixed, which is the gradient of the regularised
  /// transport cost at its optimum (envelope theorem).
  torch::Tensor distance(const torch::Tensor& a, const torch::Tensor& b) const {
    const int64_t T = a.size(1), U = b.size(1);
    // |a_i|² + |b_j|² − 2 a_i·b_j: never builds the B×T×U×C differences (4 GB at Table 3's size)
    auto cost = (a.pow(2).sum(-1).unsqueeze(2) + b.pow(2).sum(-1).unsqueeze(1) - 2 * torch::bmm(a, b.transpose(1, 2)))
                    .clamp_min(0) /
                static_cast<double>(a.size(2));  // B×T×U
    torch::Tensor plan;
    {
      torch::NoGradGuard no_grad;
      auto m = cost.to(torch::kDouble);
      const double eps = epsilon_ * std::max(1e-12, m.mean().item<double>());
      auto f = torch::zeros({m.size(0), T}, m.options()), g = torch::zeros({m.size(0), U}, m.options());
      const double log_a = -std::log(static_cast<double>(T)), log_b = -std::log(static_cast<double>(U));
      for (int64_t it = 0; it < iterations_; ++it) {
        f = eps * (log_a - torch::logsumexp((g.unsqueeze(1) - m) / eps, 2));
        g = eps * (log_b - torch::logsumexp((f.unsqueeze(2) - m) / eps, 1));
      }
      plan = torch::exp((f.unsqueeze(2) + g.unsqueeze(1) - m) / eps).to(cost.scalar_type());
    }
    return (plan * cost).sum({1, 2});
  }

 private:
  double epsilon_;
  int64_t iterations_;
  bool detach_encoder_;
};

}  // namespace

HTM_REGISTER_PLUGIN(SinkhornLoss, manifest)
