// One named value of a run at a step, as the trainer logs it and the results store keeps it.
#pragma once

#include <string>

namespace htm {

struct Metric {
  std::string name;
  double value;
};

}  // namespace htm
