// The model assembled once: the only place in model/ that reads ModelOptions' enums. Each option
// picks a part here, and the pass (model.cpp, encoder.cpp, decoder.cpp) calls the parts without
// asking which they are. Parameter names and registration order are checkpoints' and initial
// draws' contract: adapter, policy, merge, encoder_block, decoder_block, merge_refine,
// unmerge_refine, head_norm, head, leaf_head, then the timesteps buffer.
#include <cmath>
#include <utility>

#include <torch/torch.h>

#include "htm/error.h"
#include "model/model.h"

namespace htm {
namespace {

constexpr int64_t kMaxDepth = 64;

torch::Tensor sinusoids(int64_t depths, int64_t dim) {  // paper eq. 7
  auto d = torch::arange(depths, torch::kFloat).unsqueeze(1);
  auto i = torch::arange(0, dim, 2, torch::kFloat);
  auto angle = d / torch::pow(10000.0, i / static_cast<double>(dim));
  auto te = torch::zeros({depths, dim});
  te.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, dim, 2)}, torch::sin(angle));
  te.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, dim, 2)}, torch::cos(angle).narrow(1, 0, dim / 2));
  return te;
}

// model.merged_scale (A.4): the factor of a draw's tokens, B×r×1 (undefined: none).
torch::Tensor no_factor(const torch::Tensor&) { return {}; }
torch::Tensor probability(const torch::Tensor& log_prob) {
  return log_prob.defined() ? log_prob.exp().unsqueeze(-1) : torch::Tensor();
}

}  // namespace

HtmModelImpl::HtmModelImpl(const ModelOptions& options, std::shared_ptr<Adapter> adapter,
                           std::shared_ptr<Policy> policy, std::shared_ptr<MergeOperator> merge)
    : options_(options) {
  adapter_ = register_module("adapter", std::move(adapter));
  policy_ = register_module("policy", std::move(policy));
  merge_ = register_module("merge", std::move(merge));
  const bool decoder = options_.classes == 0;
  if (options_.mixing == Mixing::transformer) {  // otherwise no block: the mixer is the identity
    encoder_block_ = register_module("encoder_block", TransformerBlock(options_));
    if (decoder) decoder_block_ = register_module("decoder_block", TransformerBlock(options_));
  }
  merge_refine_ = register_module("merge_refine", RefineBlock(options_));  // model.refinement: inside
  if (decoder) {
    unmerge_refine_ = register_module("unmerge_refine", RefineBlock(options_));
    end_ = &HtmModelImpl::reconstruct_head;
  } else {
    head_norm_ = register_module("head_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options_.dim})));
    head_ = register_module("head", Linear(options_.dim, options_.classes));
    end_ = &HtmModelImpl::classify_head;
  }
  if (options_.leaf_classifier == LeafClassifier::trained) {
    if (!decoder) throw Error("model.leaf_classifier needs the decoder: it is for reconstruction and generation");
    const int64_t C = options_.dim;
    leaf_head_ =
        register_module("leaf_head", torch::nn::Sequential(torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})),
                                                           Linear(C, C), torch::nn::GELU(), Linear(C, 2)));
  }
  scale_ = options_.merged_scale == MergedScale::probability ? &probability : &no_factor;
  mirrors_ = options_.unmerge == UnmergeChoice::mirror;
  timesteps_ = register_buffer("timesteps", options_.timestep_scale * sinusoids(kMaxDepth + 1, options_.dim));
}

}  // namespace htm
