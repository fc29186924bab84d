#include "model/schedule.h"

#include <cmath>
#include <string>

#include "htm/error.h"

namespace htm {

std::vector<int64_t> make_schedule(int64_t tokens, double fraction, int64_t layers) {
  std::vector<int64_t> schedule;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t r = static_cast<int64_t>(std::floor(fraction * tokens / 2.0 + 1e-9));
    schedule.push_back(r);
    tokens -= r;
  }
  return schedule;
}

int64_t tokens_after(int64_t tokens, const std::vector<int64_t>& schedule, size_t depth) {
  for (size_t l = 0; l < depth && l < schedule.size(); ++l) tokens -= schedule[l];
  return tokens;
}

void check_schedule(int64_t tokens, const std::vector<int64_t>& schedule) {
  if (schedule.empty()) throw Error("the merging schedule is empty");
  for (size_t l = 0; l < schedule.size(); ++l) {
    if (schedule[l] < 0 || 2 * schedule[l] > tokens)
      throw Error("merging schedule layer " + std::to_string(l + 1) + " merges " + std::to_string(schedule[l]) +
                  " pairs but only " + std::to_string(tokens) + " tokens are left (at most " +
                  std::to_string(tokens / 2) + " pairs)");
    tokens -= schedule[l];
  }
}

}  // namespace htm
