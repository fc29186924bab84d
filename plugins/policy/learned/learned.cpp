// The paper's learned policy (§3.1.2, §3.1.3): merge logits from a self-attention-like
// bilinear form on detached tokens, unmerge scores from an MLP on detached tokens.

#include "htm/bilinear_policy.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"learned",
          htm::PluginKind::policy,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Learned merge policy (QK^T over detached tokens, heads mixed by learned weights) and "
          "learned unmerge scoring MLP; paper §3.1.2-3.1.3",
          {{"heads", ValueType::integer, int64_t{0}, "policy heads; 0 = the model's heads"},
           {"score_hidden", ValueType::integer, int64_t{0},
            "hidden width of the unmerge scoring MLP; 0 = the model's width"}}};
}

class LearnedPolicy : public htm::BilinearPolicy {
 public:
  LearnedPolicy(const htm::Params& params, const htm::BuildContext& ctx) : BilinearPolicy(params, ctx) {
    add_scorers(params);
  }
};

}  // namespace

HTM_REGISTER_PLUGIN(LearnedPolicy, manifest)
