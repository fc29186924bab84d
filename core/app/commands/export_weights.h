// `htm export RUN --format weights -o FILE.pt`: a run's trained tensors and settings in a file
// Python's torch.load opens (torch::pickle_save of a dict). Declared apart from its libtorch code
// so that export.cpp compiles without libtorch's headers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace htm {

/// What the file holds besides the checkpoint's tensors.
struct WeightsExport {
  std::string checkpoint;  ///< the run's checkpoint (an OutputArchive)
  /// The run's row: "id", "experiment", "variant", "seed", ... (ints stay ints).
  std::vector<std::pair<std::string, std::variant<int64_t, std::string>>> run;
  /// Its resolved settings, key → TOML spelling (the params table).
  std::vector<std::pair<std::string, std::string>> settings;
};

struct WeightsWritten {
  size_t parameters = 0, buffers = 0;
  int64_t step = -1;  ///< the step the checkpoint was written at (-1: it does not say)
};

/// Writes {"parameters": {name: tensor}, "buffers": {name: tensor}, "settings": {key: value},
/// "run": {...}} to `out` (docs/report.md); tensor names are the model's state_dict names.
/// Throws htm::Error when the checkpoint cannot be read or `out` written.
WeightsWritten write_weights(const WeightsExport& what, const std::string& out);

}  // namespace htm
