// The merging schedule: how many pairs each encoder layer merges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace htm {

/// r per layer: r_l = floor(fraction · T_l / 2), for `layers` layers, starting from T tokens.
std::vector<int64_t> make_schedule(int64_t tokens, double fraction, int64_t layers);
/// Tokens left after the first `depth` layers of `schedule`.
int64_t tokens_after(int64_t tokens, const std::vector<int64_t>& schedule, size_t depth);
/// Throws htm::Error unless every layer merges 0 ≤ r ≤ T_l/2 pairs.
void check_schedule(int64_t tokens, const std::vector<int64_t>& schedule);

}  // namespace htm
