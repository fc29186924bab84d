#include "model/plugin_calls.h"

#include <torch/torch.h>

#include "htm/error.h"
#include "model/model.h"
#include "model/plugin_scope.h"

namespace htm {

// What the host checks of a plugin's answer before using it (called inside the plugin's scope,
// so a mismatch is reported as that plugin's fault).
void check_decision(const torch::Tensor& index, const char* what, int64_t B, int64_t r, int64_t T, bool range) {
  const bool shaped = index.defined() && index.scalar_type() == torch::kLong && index.dim() == 2 &&
                      index.size(0) == B && index.size(1) == r;
  if (!shaped)
    throw Error(std::string("its ") + what + " is " +
                (index.defined()
                     ? std::string(c10::toString(index.scalar_type())) + " of shape " + c10::str(index.sizes())
                     : std::string("undefined")) +
                ", expected int64 of shape [" + std::to_string(B) + ", " + std::to_string(r) + "]");
  if (range && (index.min().item<int64_t>() < 0 || index.max().item<int64_t>() >= T))
    throw Error(std::string("its ") + what + " holds token indices outside [0, " + std::to_string(T) + ")");
}

void check_log_prob(const torch::Tensor& log_prob, const char* what, int64_t B, int64_t r) {
  if (log_prob.defined() &&
      (log_prob.dim() != 2 || log_prob.size(0) != B || log_prob.size(1) != r || !log_prob.is_floating_point()))
    throw Error(std::string("its ") + what + " is " + std::string(c10::toString(log_prob.scalar_type())) +
                " of shape " + c10::str(log_prob.sizes()) + ", expected floating point of shape [" + std::to_string(B) +
                ", " + std::to_string(r) + "]");
}

void check_tokens(const torch::Tensor& tokens, const char* what, int64_t rows, int64_t C) {
  if (!tokens.defined() || tokens.dim() != 2 || tokens.size(0) != rows || tokens.size(1) != C)
    throw Error(std::string("its ") + what + " returned " +
                (tokens.defined() ? "shape " + c10::str(tokens.sizes()) : std::string("nothing")) + ", expected [" +
                std::to_string(rows) + ", " + std::to_string(C) + "]");
}

torch::Tensor HtmModelImpl::lift(const torch::Tensor& input) {
  PluginScope scope(PluginKind::adapter, adapter_.get());
  return adapter_->lift(input);
}

torch::Tensor HtmModelImpl::unlift(const torch::Tensor& tokens) {
  PluginScope scope(PluginKind::adapter, adapter_.get());
  return adapter_->unlift(tokens);
}

std::optional<HtmModelImpl::Truth> HtmModelImpl::truth_for(const torch::Tensor& input, const ForwardHooks* hooks) {
  if (!policy().needs_truth()) return std::nullopt;
  if (hooks == nullptr || !hooks->tree.defined())
    throw Error(
        "this policy decides from the data's true hierarchy, and the dataset gives none "
        "(oracle policies are for data with a known tree, such as trees or crosses)");
  const auto& tree = hooks->tree;  // B×(N−1)×2
  const int64_t B = tree.size(0), N = tree.size(1) + 1;
  if (input.size(0) != B || num_tokens() != N)
    throw Error("the batch's tree has " + std::to_string(N) + " leaves, but the adapter makes " +
                std::to_string(num_tokens()) + " tokens: the truth cannot be followed");
  auto parent = torch::full({B, 2 * N - 1}, -1, tree.options().dtype(torch::kLong));
  auto internal = torch::arange(N, 2 * N - 1, tree.options().dtype(torch::kLong)).expand({B, N - 1});
  parent.scatter_(1, tree.select(2, 0), internal);
  parent.scatter_(1, tree.select(2, 1), internal);
  return Truth{torch::arange(N, tree.options().dtype(torch::kLong)).expand({B, N}).contiguous(), parent};
}

}  // namespace htm
