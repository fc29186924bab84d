// Generation from a finished run (paper A.1, HTM slides).
#pragma once

#include <cstdint>
#include <string>

#include "config/settings.h"
#include "registry.h"

namespace htm {

struct SampleRequest {
  int64_t run_id = 0;
  int64_t count = 16;  ///< samples to generate
  std::string db = kDefaultResultsPath;
  std::string out;                  ///< PNG path; empty: the run's artifact folder/samples.png
  int64_t components = 8;           ///< Gaussians in the mixture
  std::string covariance = "auto";  ///< full, diag, or auto: full up to 128 dimensions
  int64_t fit_samples = 2000;       ///< training samples whose roots the mixture is fitted to
  int64_t seed = 0;
  /// Sets from a model with the leaf/internal classifier: "classifier" (unmerge what it calls
  /// internal) or "schedule" (the full schedule, as for images).
  std::string decode = "classifier";
  double leaf_threshold = 0.5;  ///< a token is a leaf when P(leaf) exceeds this
};

/// Loads the run's checkpoint, fits the mixture, decodes `count` draws and writes them as a
/// picture grid (recorded as the run's `samples` artifact). Returns the exit code.
int sample_run(const SampleRequest& request, const Registry& registry);

/// `htm sample RUN [options]` (registered in commands.cpp).
int cmd_sample(const std::vector<std::string>& args);

}  // namespace htm
