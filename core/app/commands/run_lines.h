// What htm run prints of a run that finished (run_lines.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store/results_store.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace htm {

/// A finished run's lines: its result beside its references, its memory against the estimate,
/// and, on data with a true hierarchy, the scores that matter beside the random-merge floor.
void print_finished(ResultsStore& store, int64_t run_id, const std::string& label, const TrainSummary& s,
                    int64_t parameters, const std::optional<MemoryEstimate>& memory, int verbosity);

}  // namespace htm
