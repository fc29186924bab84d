// Cross-entropy of class logits against the dataset's labels (classification, paper §4.1).
#include <torch/torch.h>

#include "htm/loss.h"

namespace {

htm::Manifest manifest() {
  return {"cross_entropy",
          htm::PluginKind::loss,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Cross-entropy of the model's class logits against the labels; paper §4.1",
          {{"label_smoothing", htm::ValueType::floating, 0.0, "mass spread evenly over all classes"}}};
}

class CrossEntropyLoss : public htm::Loss {
 public:
  CrossEntropyLoss(const htm::Params& params, const htm::BuildContext& ctx)
      : smoothing_(params.number("label_smoothing")), classes_(ctx.num_classes) {
    if (smoothing_ < 0 || smoothing_ >= 1) throw htm::Error("label_smoothing must be in [0, 1)");
    if (classes_ < 2) throw htm::Error("cross_entropy needs a dataset with classes");
  }

  torch::Tensor per_sample(const htm::LossContext& ctx) override {
    if (!ctx.labels.defined()) throw htm::Error("cross_entropy: the dataset gave no labels");
    if (ctx.output.dim() != 2 || ctx.output.size(1) != classes_)
      throw htm::Error("cross_entropy: expected B×" + std::to_string(classes_) + " class logits, got " +
                       c10::str(ctx.output.sizes()) + "; set model.task = \"classify\"");
    auto log_p = torch::log_softmax(ctx.output, 1);
    auto nll = -log_p.gather(1, ctx.labels.view({-1, 1})).squeeze(1);
    if (smoothing_ == 0) return nll;
    return (1 - smoothing_) * nll - smoothing_ * log_p.mean(1);
  }

 private:
  double smoothing_;
  int64_t classes_;
};

}  // namespace

HTM_REGISTER_PLUGIN(CrossEntropyLoss, manifest)
