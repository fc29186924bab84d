// Starting other htm processes: `--jobs N` (a variant × seed per worker process) and `--nproc N`
// (N ranks of one data-parallel run on this host, with torchrun's environment variables).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "process/run_request.h"
#include "process/supervise.h"

namespace htm {

/// Gives a run that crashed before it was claimed a `failed` row: (variant, seed, message).
using RecordUnclaimed = std::function<void(const std::string&, int64_t, const std::string&)>;

/// "<variant>-seed<S>" as one safe path component.
std::string run_file_name(const std::string& variant, int64_t seed);

/// Each of `work` in its own supervised `htm run` process (supervise.h), request.jobs at a time;
/// with --jobs N on a terminal, worker logs go to `logs` (with one live line per job). A crash is
/// recorded as its run's failure and the study goes on; the last line counts the failed runs.
/// Returns the worst exit code (1 for a crash).
/// A child that crashed before it claimed its run is given a `failed` row by `record_unclaimed`
/// (variant, seed, message), when given.
int run_parallel(const RunRequest& request, const std::vector<std::pair<std::string, int64_t>>& work,
                 const std::string& logs, const RecordUnclaimed& record_unclaimed = {});

/// --nproc: request.nproc copies of this `htm run` (without --nproc) as ranks 0..N−1 of one
/// data-parallel group on this host (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT set as torchrun sets them). When a rank ends abnormally, the others get
/// `grace_s` seconds to notice and record it, then SIGTERM. Returns rank 0's exit code, or the
/// worst one when a rank failed.
/// Each rank is supervised as a single run is (supervise.h): a rank that crashes fails the run
/// rank 0 claimed, naming the rank, the signal, the plugin and the step; the ranks are then
/// started again for the study's other `runs`, skipping those that crashed (the next htm run
/// resumes them once, as a single run's crash). A crash in construction, before the run was
/// claimed, is given a `failed` row by `record_unclaimed`, when given.
int run_ranks(const RunRequest& request, size_t runs = 1, const RecordUnclaimed& record_unclaimed = {},
              int grace_s = 30);

/// A rank an outside launcher started (torchrun, srun: RANK and WORLD_SIZE set): this `htm run`
/// trains the rank in a supervised child and, when it crashes, records the crash in the run
/// (ChildBoard::settle_outside_rank; `place` gives a variant's experiment and results file).
/// No rank is started again: the launcher owns the group. Returns the exit code to report.
int run_outside_rank(const RunRequest& request, int rank, int world, const ChildBoard::RunPlace& place);

/// In a rank that run_ranks started again after a crash: whether the run `label` crashed in
/// this htm run (HTM_CRASHED_RUNS, one label a line), so that rank 0 skips it.
bool crashed_in_this_launch(const std::string& label);

/// How launch_ranks starts its ranks and ends them.
struct RankLaunch {
  std::string rank0_log;                 ///< rank 0's output, when given
  int grace_s = 30;                      ///< the others' time to notice a rank's abnormal end, as run_ranks
  std::vector<std::string> environment;  ///< added to each rank's
  std::string* crashed = nullptr;        ///< if given, receives the label of the run a rank crashed in ("" none)
  RecordUnclaimed record_unclaimed;      ///< as run_ranks
};
/// Starts `args` (args[0]: self_path()) as ranks 0..n−1 on this host and waits for them, as
/// run_ranks does.
int launch_ranks(const std::vector<std::string>& args, int n, const RankLaunch& launch = {});

/// Runs `args` (args[0]: self_path()) as one worker process, output to `log`; its exit code.
int run_child(const std::vector<std::string>& args, const std::string& log);

/// Starts `args` (args[0]: self_path()) as a worker process with `environment` added (output
/// to `log` when given; signals are passed on to it), and waits for one (its wait status).
pid_t start_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment,
                   const std::string& log);
int wait_worker(pid_t pid);

/// A wait status as a shell shows it: the exit code, or 128 + the signal.
int exit_code(int status);

/// This executable's path.
std::string self_path();

}  // namespace htm
