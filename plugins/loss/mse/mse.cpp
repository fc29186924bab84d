// Mean squared reconstruction error (the paper's objective, §4.2).
#include <torch/torch.h>

#include "htm/loss.h"

namespace {

htm::Manifest manifest() {
  return {"mse",
          htm::PluginKind::loss,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Mean squared error between the output and the input (reconstruction); paper §4.2",
          {}};
}

class MseLoss : public htm::Loss {
 public:
  MseLoss(const htm::Params&, const htm::BuildContext&) {}

  torch::Tensor per_sample(const htm::LossContext& ctx) override {
    if (ctx.output.sizes() != ctx.input.sizes())
      throw htm::Error("mse: output shape " + shape(ctx.output) + " differs from input shape " + shape(ctx.input) +
                       "; is this a reconstruction model?");
    return (ctx.output - ctx.input).pow(2).flatten(1).mean(1);
  }

 private:
  static std::string shape(const torch::Tensor& t) {
    std::ostringstream os;
    os << t.sizes();
    return os.str();
  }
};

}  // namespace

HTM_REGISTER_PLUGIN(MseLoss, manifest)
