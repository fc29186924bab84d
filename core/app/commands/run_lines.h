// What htm run prints of a run that finished (run_lines.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/results_store.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace htm {

/// A run that finished here: its row, its label, what training gave and its size.
struct FinishedRun {
  int64_t run_id = 0;
  std::string label;
  TrainSummary summary;
  int64_t parameters = 0;                ///< the parameters its objective trains
  std::optional<MemoryEstimate> memory;  ///< the estimate made before its first step, if any
};

/// A finished run's lines: its result beside its references, its memory against the estimate,
/// and, on data with a true hierarchy, the scores that matter beside the random-merge floor.
void print_finished(ResultsStore& store, const FinishedRun& run, int verbosity);

}  // namespace htm
