// One planned run of a study, from its claim in the results database to its record: what every
// way of running a study (commands/runner.cpp's executors) does for each run it trains here.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <string>

#include "commands/selection.h"
#include "config/settings.h"
#include "registry.h"

namespace htm {

class Communicator;

/// How a run ended here. held: not resumed because it crashed too often at one step; failed for
/// the exit code, but every rank skipped it together, so a data-parallel group goes on.
enum class Outcome { finished, skipped, failed, held, interrupted };

/// What every run of one request shares: where it comes from and what the request asks of it.
struct RunContext {
  std::string file;                         ///< the experiment file, as recorded in each run
  const Registry* registry = nullptr;       ///< the plugins
  bool rerun = false;                       ///< train runs already finished again
  bool ignore_memory = false;               ///< train runs that would not fit the memory available
  std::map<std::string, std::string> tags;  ///< set on every run (--tag, --note, --confirm's phase)
  int verbosity = 1;
  int64_t expected_run = 0;      ///< the run htm resume names (0: whichever claim_run finds)
  bool retry_crashed = false;    ///< resume a run held after crashing twice at one step
  Communicator* comm = nullptr;  ///< a data-parallel rank's group (rank 0 decides, the others follow)
};

/// Trains one run of the plan and records it; with a rank group, rank 0 claims and records it and
/// the other ranks follow (follow_run). An htm::Error before the claim (bad input) propagates.
Outcome run_one(const PlannedRun& planned, const RunContext& context);

/// A rank other than 0: trains the run rank 0 decided on, recording into a private in-memory store.
Outcome follow_run(const PlannedRun& planned, const RunContext& context);

/// A run's [runtime] in force: its threads (or this host's cores shared by its ranks when 0), its
/// precision, the watchdog's and the stop's timeouts. Returns whether bf16 was asked for but fell
/// back to fp32.
bool apply_runtime(const RuntimeSettings& runtime, const Communicator* comm);

/// The first line of an exception's text, without libtorch's backtrace (`full` gets all of it).
std::string one_line(const std::exception& e, std::string* full);

}  // namespace htm
