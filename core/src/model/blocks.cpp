// The transformer and refinement blocks (blocks.h).
#include "model/blocks.h"

#include <functional>
#include <vector>

#include <torch/torch.h>

#include "kernels/row_shard_scope.h"

namespace htm {
namespace {

using torch::autograd::variable_list;

// What backward needs to run a block again: the block's computation and parameters, the global
// generator's state before it ran, and the rows of the batch this process held (a data-parallel
// rank's masks are drawn for the whole batch and its rows kept, htm/row_shard.h).
struct Again : torch::CustomClassHolder {
  std::function<torch::Tensor(const variable_list&)> run;
  std::vector<torch::Tensor> parameters;
  torch::Tensor generator_state;
  RowShard shard;
};

// The global generator set to `state` for a scope, and put back as it was after it (an
// exception included).
class GeneratorAt {
 public:
  explicit GeneratorAt(const torch::Tensor& state)
      : generator_(at::detail::getDefaultCPUGenerator()), was_(generator_.get_state()) {
    generator_.set_state(state);
  }
  ~GeneratorAt() { generator_.set_state(was_); }
  GeneratorAt(const GeneratorAt&) = delete;
  GeneratorAt& operator=(const GeneratorAt&) = delete;

 private:
  at::Generator generator_;
  torch::Tensor was_;
};

// `run` over (a, b, c) (b and c may be absent) with the block's `parameters`, keeping only the
// inputs: backward runs it again with gradients, from the generator state it first ran from, and
// returns the gradients of the inputs and of the parameters alike (the parameters are this
// function's inputs, so autograd accumulates each once per backward, however many blocks use it).
class Recomputed : public torch::autograd::Function<Recomputed> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                               const c10::optional<torch::Tensor>& b, const c10::optional<torch::Tensor>& c,
                               at::TensorList parameters, std::function<torch::Tensor(const variable_list&)> run) {
    auto again = c10::make_intrusive<Again>();
    again->generator_state = at::detail::getDefaultCPUGenerator().get_state();
    again->shard = current_row_shard();
    again->parameters = parameters.vec();
    const variable_list inputs = {a, b.value_or(torch::Tensor()), c.value_or(torch::Tensor())};
    torch::Tensor out;
    {
      torch::NoGradGuard no_grad;
      out = run(inputs);
    }
    again->run = std::move(run);
    ctx->save_for_backward(inputs);
    ctx->saved_data["again"] = c10::IValue::make_capsule(std::move(again));
    return out;
  }

  static variable_list backward(torch::autograd::AutogradContext* ctx, variable_list grads) {
    const auto again = c10::static_intrusive_pointer_cast<Again>(ctx->saved_data["again"].toCapsule());
    variable_list inputs;
    for (const auto& saved : ctx->get_saved_variables())
      inputs.push_back(saved.defined() ? saved.detach().requires_grad_(saved.requires_grad()) : saved);
    torch::Tensor out;
    {
      GeneratorAt replay(again->generator_state);
      torch::AutoGradMode enabled(true);
      RowShardScope rows(again->shard);
      out = again->run(inputs);
    }
    variable_list result = inputs;  // then the parameters, then `run`
    result.insert(result.end(), again->parameters.begin(), again->parameters.end());
    variable_list wanted;
    for (const auto& t : result)
      if (t.defined() && t.requires_grad()) wanted.push_back(t);
    const variable_list found = torch::autograd::grad({out}, wanted, {grads[0]}, false, false, /*allow_unused=*/true);
    size_t next = 0;
    for (auto& t : result) t = t.defined() && t.requires_grad() ? found[next++] : torch::Tensor();
    result.push_back(torch::Tensor());  // `run`
    return result;
  }
};

// Whether a block runs under Recomputed: in training, with gradients, and asked to.
bool recomputing(bool asked, bool training) { return asked && training && torch::GradMode::is_enabled(); }

}  // namespace

TransformerBlockImpl::TransformerBlockImpl(const ModelOptions& o)
    : recompute_(o.recompute_blocks), dropout_(o.dropout) {
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
  attn_ = register_module("attn", Attention(o.dim, o.heads, o.dropout));
  mlp_ = register_module("mlp", ResidualMlp(o.dim, o.mlp_ratio, o.dropout));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, torch::Tensor* attention) {
  if (attention != nullptr || !recomputing(recompute_, is_training())) return compute(x, attention);
  const std::vector<torch::Tensor> own = parameters();
  return Recomputed::apply(x, c10::optional<torch::Tensor>(), c10::optional<torch::Tensor>(), at::TensorList(own),
                           [this](const variable_list& in) { return compute(in[0], nullptr); });
}

torch::Tensor TransformerBlockImpl::compute(const torch::Tensor& x, torch::Tensor* attention) {
  return mlp_->forward(x + fast_dropout(attn_->norm_forward(x, *norm_, attention), dropout_, is_training()));
}

RefineBlockImpl::RefineBlockImpl(const ModelOptions& o) : recompute_(o.recompute_blocks), dropout_(o.dropout) {
  if (o.refinement == Refinement::cross_attention) {
    norm_q_ = register_module("norm_q", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
    norm_kv_ = register_module("norm_kv", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
    attn_ = register_module("attn", Attention(o.dim, o.heads, o.dropout));
  }
  mlp_ = register_module("mlp", ResidualMlp(o.dim, o.mlp_ratio, o.dropout));
}

// The norm keeps old_tokens for its backward anyway: through norm_linear the keys and values keep
// only them, not their normalised copy as well.
std::pair<torch::Tensor, torch::Tensor> RefineBlockImpl::key_values(const torch::Tensor& old_tokens) {
  if (!attn_) return {};  // the MLP alone
  return attn_->norm_key_values(old_tokens, *norm_kv_);
}

torch::Tensor RefineBlockImpl::forward(const torch::Tensor& new_tokens, const torch::Tensor& keys,
                                       const torch::Tensor& values) {
  if (!recomputing(recompute_, is_training())) return compute(new_tokens, keys, values);
  const auto given = [](const torch::Tensor& t) {
    return t.defined() ? c10::optional<torch::Tensor>(t) : c10::nullopt;
  };
  const std::vector<torch::Tensor> own = parameters();
  return Recomputed::apply(new_tokens, given(keys), given(values), at::TensorList(own),
                           [this](const variable_list& in) { return compute(in[0], in[1], in[2]); });
}

torch::Tensor RefineBlockImpl::compute(const torch::Tensor& new_tokens, const torch::Tensor& keys,
                                       const torch::Tensor& values) {
  auto x = new_tokens;
  if (attn_) x = x + fast_dropout(attn_->norm_attend(x, *norm_q_, keys, values), dropout_, is_training());
  return mlp_->forward(x);
}

}  // namespace htm
