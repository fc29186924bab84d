// The distances the similarity policies merge by (`nearest`, and `residual`'s anchor), between
// detached tokens. Header-only: a plugin compiles it into itself, so it adds nothing to the
// host's ABI.
#pragma once

#include <string>

#include <torch/torch.h>

#include "htm/error.h"

namespace htm {

/// Refuses any distance but "euclidean" and "cosine", naming `plugin` in the message.
inline void check_pair_distance(const std::string& plugin, const std::string& distance) {
  if (distance != "euclidean" && distance != "cosine")
    throw Error(plugin + ": distance must be \"euclidean\" or \"cosine\", got \"" + distance + "\"");
}

/// B×T×T, minus the distances between the detached tokens (nothing learned reaches them):
/// −‖x_i − x_j‖, or cos(x_i, x_j) − 1. Computed in place: at B = T = 256 each fresh B×T×T tensor
/// costs more than the greedy matching itself.
inline torch::Tensor minus_pair_distances(const torch::Tensor& tokens, const std::string& distance) {
  torch::NoGradGuard no_grad;
  auto x = tokens.detach().to(torch::kFloat);
  if (distance == "euclidean") return torch::cdist(x, x).neg_();
  auto unit = torch::nn::functional::normalize(x, torch::nn::functional::NormalizeFuncOptions().dim(-1));
  return torch::bmm(unit, unit.transpose(1, 2)).sub_(1);  // cos - 1 = -(1 - cos)
}

}  // namespace htm
