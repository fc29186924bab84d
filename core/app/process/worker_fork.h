// A worker process as a copy of this one (fork without exec), where that is safe.
//
// Every htm process spends about 0.7 s of CPU loading libtorch's ~290 shared libraries and
// running their static initialisers before its first line (2-core AMD EPYC, docs/reliability.md),
// and every supervised run, each run of a study and each --nproc rank is a process of its own.
// A copy of the supervisor has all of that done. It starts where a new process would: its own
// process group, the environment and output a new one would have been given, the descriptors
// marked close-on-exec closed, a signal thread of its own, no interrupt, torch's default
// generator at its default seed; then it runs the command line a new process would have parsed,
// and exits with its code.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace htm {

/// What a copy runs: the executable's own command dispatcher (main.cpp), argv as main's.
using WorkerEntry = int (*)(int argc, char** argv);
/// Set by main, after it started the signal thread (signals.h): without it no worker is a copy.
void set_worker_entry(WorkerEntry entry);

/// Whether the worker `args` with `environment` may be a copy of this process: it trains (`htm
/// run`, `htm resume`; `htm bench` starts new processes for a clean peak memory) and is no
/// data-parallel rank (RANK set: tools find a rank by /proc/PID/environ, which shows the
/// environment a process was started with, for a copy its supervisor's), args[0] is this executable, its
/// main set the entry, and no thread but main's and its signal thread runs (a thread holding a
/// lock at the fork would leave it held in the copy: torch's OpenMP pool, once an op ran on two
/// threads, is such a thread), and CUDA's libraries are not loaded (a CUDA libtorch: a process
/// that initialised CUDA cannot use it in a fork). HTM_WORKER_SPAWN=exec says no: every worker a
/// new process.
bool may_fork_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment);

/// Starts the copy: `args` as its command line (args[0]: this executable), `environment` its
/// whole environment, its output to `log` when given. Its pid, remembered as a worker that
/// signals are passed on to (signals.h); throws Error when the fork fails.
pid_t fork_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment,
                  const std::string& log);

/// How htm's processes end, main's and a copy's alike: stdio flushed, then out without the static
/// destructors. htm's own objects are gone by then (they live in the command's scopes); libtorch's
/// would undo its thousands of operator registrations one by one (~0.3 s), in a copy first copying
/// each page they write from the supervisor's (~0.5 s): a third of a small run's wall time.
[[noreturn]] void leave(int code);

}  // namespace htm
