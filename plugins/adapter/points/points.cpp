// Point-set adapter (HTM slides: Crosses and Trees): one token per element of a set of points or
// segments, lifted and unlifted by per-token MLPs; reconstructions are scored after matching.
#include <cmath>

#include <torch/torch.h>

#include "htm/adapter.h"
#include "htm/error.h"
#include "htm/layers.h"
#include "htm/sets.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"points",
          htm::PluginKind::adapter,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Sets of points or segments (N×F): per-token Fourier-feature MLP lifter, MLP unlifter "
          "with tanh; error after exact matching (or token by token); HTM slides (Crosses, Trees)",
          {{"fourier_bands", ValueType::integer, int64_t{6},
            "sin/cos bands per coordinate at frequencies π·1..bands (0: raw coordinates only)"},
           {"hidden_ratio", ValueType::integer, int64_t{2},
            "hidden width of the lifter and unlifter MLPs, as a multiple of C"},
           {"error", ValueType::string, std::string("matched"),
            "the reconstruction error: matched (the output set matched to the input set, exactly) or ordered "
            "(token i against token i: for models that give the tokens back in their order, model.unmerge = "
            "\"mirror\")"}}};
}

class PointsAdapter : public htm::Adapter {
 public:
  PointsAdapter(const htm::Params& params, const htm::BuildContext& ctx)
      : bands_(params.integer("fourier_bands")), ordered_(params.text("error") == "ordered") {
    if (params.text("error") != "matched" && !ordered_)
      throw htm::Error("points: error must be \"matched\" or \"ordered\", got \"" + params.text("error") + "\"");
    if (ctx.sample_shape.size() != 2)
      throw htm::Error(
          "points adapter needs N×F samples (N points or segments of F coordinates); "
          "the dataset gives " +
          std::to_string(ctx.sample_shape.size()) + " dimensions");
    tokens_ = ctx.sample_shape[0];
    features_ = ctx.sample_shape[1];
    if (bands_ < 0) throw htm::Error("points: fourier_bands must be 0 or more");
    const int64_t hidden_ratio = params.integer("hidden_ratio");
    if (hidden_ratio < 1) throw htm::Error("points: hidden_ratio must be at least 1");
    const int64_t C = ctx.dim, H = hidden_ratio * ctx.dim, in = features_ * (1 + 2 * bands_);
    freqs_ = register_buffer("freqs", M_PI * torch::arange(1, bands_ + 1, torch::kFloat));
    lift_in_ = register_module("lift_in", htm::Linear(in, H));
    lift_out_ = register_module("lift_out", htm::Linear(H, C));
    lift_norm_ = register_module("lift_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    unlift_norm_ = register_module("unlift_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    unlift_in_ = register_module("unlift_in", htm::Linear(C, H));
    unlift_out_ = register_module("unlift_out", htm::Linear(H, features_));
  }

  int64_t num_tokens() const override { return tokens_; }

  // B×N×F → B×N×C: [x, sin(πkx), cos(πkx)] per coordinate, MLP, LayerNorm.
  torch::Tensor lift(const torch::Tensor& input) override {
    auto x = input;
    if (bands_ > 0) {
      auto angles = (input.unsqueeze(-1) * freqs_).flatten(2);  // B×N×(F·bands)
      x = torch::cat({input, angles.sin(), angles.cos()}, -1);
    }
    return lift_norm_->forward(lift_out_->forward(torch::gelu(lift_in_->forward(x))));
  }

  // B×T×C → B×T×F in [-1, 1]; T may differ from N (generation decodes as many as it finds).
  torch::Tensor unlift(const torch::Tensor& tokens) override {
    return torch::tanh(htm::norm_mlp(tokens, *unlift_norm_, *unlift_in_, *unlift_out_));
  }

  torch::Tensor reconstruction_error(const torch::Tensor& output, const torch::Tensor& input) override {
    if (ordered_ && output.sizes() == input.sizes()) return htm::Adapter::reconstruction_error(output, input);
    return htm::matched_mse(output, input);
  }

 private:
  int64_t tokens_ = 0, features_ = 0, bands_ = 0;
  bool ordered_ = false;
  torch::Tensor freqs_;
  htm::Linear lift_in_{nullptr}, lift_out_{nullptr}, unlift_in_{nullptr}, unlift_out_{nullptr};
  torch::nn::LayerNorm lift_norm_{nullptr}, unlift_norm_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(PointsAdapter, manifest)
