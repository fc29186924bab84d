// Permutation-invariant reconstruction loss for sets of points or segments (HTM slides): the
// decoder's output set comes in no fixed order, so it is compared after matching.
#include <torch/torch.h>

#include "htm/loss.h"
#include "htm/sets.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"point_set",
          htm::PluginKind::loss,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Set reconstruction error in no fixed order: squared error after an exact (Hungarian) "
          "matching, or Chamfer; HTM slides (Crosses, Trees)",
          {{"method", ValueType::string, std::string("hungarian"),
            "hungarian (exact matching, O(N³) per sample) or chamfer (nearest neighbours, cheaper)"}}};
}

class PointSetLoss : public htm::Loss {
 public:
  PointSetLoss(const htm::Params& params, const htm::BuildContext&) : method_(params.text("method")) {
    if (method_ != "hungarian" && method_ != "chamfer")
      throw htm::Error("point_set: method must be \"hungarian\" or \"chamfer\", got \"" + method_ + "\"");
  }

  torch::Tensor per_sample(const htm::LossContext& ctx) override {
    if (ctx.output.dim() != 3 || ctx.output.sizes() != ctx.input.sizes())
      throw htm::Error("point_set: expects B×N×F sets of the input's shape; got output " +
                       c10::str(ctx.output.sizes()) + " for input " + c10::str(ctx.input.sizes()));
    return method_ == "hungarian" ? htm::matched_mse(ctx.output, ctx.input) : htm::chamfer(ctx.output, ctx.input);
  }

 private:
  std::string method_;
};

}  // namespace

HTM_REGISTER_PLUGIN(PointSetLoss, manifest)
