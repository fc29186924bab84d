// Image adapter (paper §3.1.1, A.2): Fourier-feature patch lifter and Perceiver-IO unlifter.
#include <cmath>

#include <torch/torch.h>

#include "htm/adapter.h"
#include "htm/error.h"
#include "htm/layers.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {
      "image",
      htm::PluginKind::adapter,
      "1.1.0",
      htm::kSdkAbiVersion,
      "Images: Fourier features + n×n patches -> LN/Linear/LN lifter; Perceiver-IO "
      "cross-attention unlifter, per-pixel MLP head, tanh; paper §3.1.1, A.2",
      {{"patch", ValueType::integer, int64_t{2}, "patch side n (image sides must divide by it)"},
       {"fourier_bands", ValueType::integer, int64_t{64},
        "frequency bands per axis, linearly spaced from 1/max(H,W) to min(H,W)/2"},
       {"head_ratio", ValueType::integer, int64_t{1}, "hidden width of the per-pixel output MLP, as a multiple of C"},
       {"queries", ValueType::string, std::string("pixel"),
        "unlifter queries: pixel (one per pixel, paper A.2) or patch (one per patch, decoding its n×n pixels)"},
       {"heads", ValueType::integer, int64_t{0}, "unlifter attention heads; 0 = the model's heads"}}};
}

// F×H×W position features: raw (x, y) and sin/cos(2π·coord·freq) per axis (paper A.2).
torch::Tensor fourier_features(int64_t H, int64_t W, int64_t bands) {
  auto ys = torch::linspace(-1, 1, H).view({H, 1}).expand({H, W});
  auto xs = torch::linspace(-1, 1, W).view({1, W}).expand({H, W});
  auto freqs = torch::linspace(1.0 / std::max(H, W), std::min(H, W) / 2.0, bands).view({bands, 1, 1});
  auto ay = 2 * M_PI * ys.unsqueeze(0) * freqs, ax = 2 * M_PI * xs.unsqueeze(0) * freqs;
  return torch::cat({xs.unsqueeze(0), ys.unsqueeze(0), ay.sin(), ay.cos(), ax.sin(), ax.cos()}, 0);
}

class ImageAdapter : public htm::Adapter {
 public:
  ImageAdapter(const htm::Params& params, const htm::BuildContext& ctx) : patch_(params.integer("patch")) {
    if (ctx.sample_shape.size() != 3)
      throw htm::Error("image adapter needs C×H×W samples; the dataset gives " +
                       std::to_string(ctx.sample_shape.size()) + " dimensions");
    channels_ = ctx.sample_shape[0];
    height_ = ctx.sample_shape[1];
    width_ = ctx.sample_shape[2];
    const int64_t bands = params.integer("fourier_bands");
    if (patch_ <= 0 || height_ % patch_ != 0 || width_ % patch_ != 0)
      throw htm::Error("patch (" + std::to_string(patch_) + ") must divide the image size " + std::to_string(height_) +
                       "x" + std::to_string(width_));
    if (bands <= 0) throw htm::Error("fourier_bands must be positive");
    positions_ = register_buffer("positions", fourier_features(height_, width_, bands));
    const int64_t features = positions_.size(0), C = ctx.dim;
    const int64_t patch_in = (channels_ + features) * patch_ * patch_;

    lift_norm_ = register_module("lift_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({patch_in})));
    lift_linear_ = register_module("lift_linear", htm::Linear(patch_in, C));
    lift_out_norm_ = register_module("lift_out_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    auto pos = patches(positions_.unsqueeze(0))[0];  // T×(F·n²), the same for every image
    pos_patches_ = register_buffer("pos_patches", pos);
    pos_sum_ = register_buffer("pos_sum", pos.sum(-1));
    pos_sumsq_ = register_buffer("pos_sumsq", pos.pow(2).sum(-1));
    const std::string queries = params.text("queries");
    if (queries != "pixel" && queries != "patch")
      throw htm::Error("queries must be \"pixel\" or \"patch\", not \"" + queries + "\"");
    patch_queries_ = queries == "patch";
    const int64_t heads = params.integer_or("heads", ctx.heads);
    if (C % heads != 0) throw htm::Error("heads (" + std::to_string(heads) + ") must divide the model's width");
    query_ = register_module("query", htm::Linear(patch_queries_ ? pos.size(1) : features, C));
    norm_q_ = register_module("norm_q", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    norm_kv_ = register_module("norm_kv", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    attn_ = register_module("attn", htm::Attention(C, heads, ctx.dropout));
    const int64_t hidden = params.integer("head_ratio") * C;
    if (hidden <= 0) throw htm::Error("head_ratio must be positive");
    head_ = register_module(
        "head", torch::nn::Sequential(torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})), htm::Linear(C, hidden),
                                      torch::nn::GELU(),
                                      htm::Linear(hidden, patch_queries_ ? channels_ * patch_ * patch_ : channels_)));
  }

  int64_t num_tokens() const override { return (height_ / patch_) * (width_ / patch_); }

  /// B×K×H×W → B×T×(K·n·n): each n×n patch flattened channel-major, patches row-major.
  torch::Tensor patches(const torch::Tensor& x) const {
    const int64_t B = x.size(0), K = x.size(1), n = patch_;
    return x.view({B, K, height_ / n, n, width_ / n, n})
        .permute({0, 2, 4, 1, 3, 5})
        .reshape({B, num_tokens(), K * n * n});
  }

  // LayerNorm → Linear → LayerNorm of each patch's [pixels; Fourier features] vector, computed
  // without building that vector: the features are the same for every image, so their share
  // of the Linear and of the LayerNorm statistics is computed once per batch. Exactly equal
  // to the plain composition (tests/image_adapter_test.cpp) at a fraction of its memory.
  torch::Tensor lift(const torch::Tensor& input) override {
    auto pix = patches(input);  // B×T×(channels·n²)
    const int64_t n_pix = pix.size(2), n_all = n_pix + pos_patches_.size(1);
    auto w = lift_linear_->weight * lift_norm_->weight;  // C×n_all: the Linear after LN's scale
    auto mean = (pix.sum(-1) + pos_sum_) / n_all;
    auto var = (pix.pow(2).sum(-1) + pos_sumsq_) / n_all - mean.pow(2);
    auto rstd = torch::rsqrt(var + lift_norm_->options.eps()).unsqueeze(-1);
    auto y = torch::matmul(pix, w.narrow(1, 0, n_pix).t()) +
             torch::matmul(pos_patches_, w.narrow(1, n_pix, n_all - n_pix).t());
    y = rstd * (y - mean.unsqueeze(-1) * w.sum(1)) +
        (lift_linear_->bias + torch::mv(lift_linear_->weight, lift_norm_->bias));
    return lift_out_norm_->forward(y);
  }

  // Perceiver IO: queries from Fourier features, shared by the whole batch, attend over the
  // decoder's tokens; a head maps each to its values. One query per pixel (paper A.2), or one
  // per patch whose head emits the patch's n×n pixels.
  torch::Tensor unlift(const torch::Tensor& tokens) override {
    const int64_t B = tokens.size(0), n = patch_;
    auto features = patch_queries_ ? pos_patches_ : positions_.view({positions_.size(0), -1}).t();
    auto q = query_->forward(features).unsqueeze(0);  // 1×Q×C
    // The keys and values keep the tokens for backward, not their normalised copy too.
    auto [keys, values] = attn_->norm_key_values(tokens, *norm_kv_);
    auto y = q + attn_->attend(norm_q_->forward(q), keys, values);  // B×Q×C
    // The head as one MLP body, which keeps less for backward (htm/layers.h).
    y = torch::tanh(htm::norm_mlp(y, head_));  // B×P×channels, or B×T×(channels·n²) channel-major
    if (!patch_queries_) return y.transpose(1, 2).reshape({B, channels_, height_, width_});
    return y.view({B, height_ / n, width_ / n, channels_, n, n})
        .permute({0, 3, 1, 4, 2, 5})
        .reshape({B, channels_, height_, width_});
  }

 private:
  int64_t patch_, channels_ = 0, height_ = 0, width_ = 0;
  bool patch_queries_ = false;
  torch::Tensor positions_, pos_patches_, pos_sum_, pos_sumsq_;
  torch::nn::LayerNorm lift_norm_{nullptr}, lift_out_norm_{nullptr};
  htm::Linear lift_linear_{nullptr};
  torch::nn::Sequential head_{nullptr};
  htm::Linear query_{nullptr};
  torch::nn::LayerNorm norm_q_{nullptr}, norm_kv_{nullptr};
  htm::Attention attn_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(ImageAdapter, manifest)
