#include "model/plugin_calls.h"

#include <torch/torch.h>

#include "htm/error.h"

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

}  // namespace htm
