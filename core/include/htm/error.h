// The one exception type users see: its message is a complete sentence, printed as is.
#pragma once

#include <stdexcept>
#include <string>

namespace htm {

/// An error caused by input (a file, a value, a plugin). `htm` prints `what()` and exits 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  ~Error() override;
};

}  // namespace htm
