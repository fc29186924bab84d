// The host's side of each call into a plugin from the model: the checks of what the plugin
// answered (run inside the plugin's scope, so a mismatch is reported as its fault), the
// adapter's calls, and the truth an oracle policy follows.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace htm {

/// A decision's token indices: int64 of shape B×r, and with `range`, values in [0, T) (that
/// costs two reductions, so the model checks values at a call site's first call per policy).
void check_decision(const at::Tensor& index, const char* what, int64_t B, int64_t r, int64_t T, bool range);
/// A decision's log-probabilities, when given: floating point of shape B×r.
void check_log_prob(const at::Tensor& log_prob, const char* what, int64_t B, int64_t r);
/// A merge operator's output: rows × C.
void check_tokens(const at::Tensor& tokens, const char* what, int64_t rows, int64_t C);

}  // namespace htm
