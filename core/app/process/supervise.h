// Runs in supervised child processes: `htm run` trains every run in a child of its own (with
// --jobs 1 as well), so that a plugin that crashes costs that run, not the study. The child
// publishes its run, step, phase and executing plugin call on a board (board/run_board.h); when
// it dies by a signal, the supervisor records the run failed with what the board says. While it
// lives, a watchdog reads the board's beats: a child that makes no progress for its
// runtime.stall_timeout is killed and its run failed as stalled; one still alive when a stop's
// grace has passed (signals.h) is killed and its run recorded interrupted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace htm {

struct RunBoard;  // board/run_board.h

/// Whether this process is a supervised child (HTM_RUN_BOARD is set): it trains in-process.
bool supervised_child();

/// How a supervised child ended, as the supervisor sees it.
struct ChildEnd {
  int code = 0;                   ///< the exit code to count: 1 for a crash, else the child's own
  bool crashed = false;           ///< died by a signal (or exited) without recording its run's outcome
  bool claimed = false;           ///< it had claimed a run (board's run id)
  bool database_corrupt = false;  ///< its run met a malformed database
  int64_t run_id = 0;
  std::string label;    ///< the run's label as the child gave it ("" before it attempted one)
  std::string variant;  ///< the run it attempted (board_attempt; "" when it said none)
  int64_t seed = 0;
  std::string message;  ///< the crash, in one line ("" when it ended on its own terms)
};

/// Why a supervisor ended a child itself.
struct Forced {
  enum class Kind { none, stalled, stopped } kind = Kind::none;
  std::string what;  ///< stalled: "no progress for 6 s (runtime.stall_timeout 5 s)"
};

/// A child's board: created with the child, which removes its name once it has mapped it (a
/// supervisor killed by SIGKILL leaves no file behind); read through a descriptor this object keeps.
class ChildBoard {
 public:
  ChildBoard();
  ~ChildBoard();
  ChildBoard(const ChildBoard&) = delete;
  ChildBoard& operator=(const ChildBoard&) = delete;
  /// "HTM_RUN_BOARD=<path>", for the child's environment.
  std::string environment() const;
  /// The board as the child left it; false when it wrote none.
  bool read(RunBoard* out) const;
  /// After the child `pid` ended with wait status `status`: a crash (a signal other than
  /// SIGINT/SIGTERM, or an exit that left its run running) is recorded in the run's database as
  /// failed, naming the signal, the plugin executing and the step; a stall (`forced`) likewise,
  /// naming the call and phase; a run a stop left running is recorded interrupted.
  ChildEnd settle(pid_t pid, int status, const Forced& forced = {}) const;
  /// The same for rank `rank` of `world` data-parallel ranks, after all of them ended: the run is
  /// the one rank 0 claimed (`rank0`'s board, its process `rank0_pid`), the plugin and step
  /// this rank's; the run is failed even when rank 0 recorded an outcome of its own after the
  /// crash (ResultsStore::record_rank_crash).
  ChildEnd settle_rank(int status, int rank, int world, const ChildBoard& rank0, pid_t rank0_pid,
                       const Forced& forced = {}) const;
  /// The same for a rank an outside launcher started (torchrun, srun), supervised by its own
  /// `htm run`: rank 0 records its crash in the run it claimed; another rank finds that run in
  /// the database `place` names for the variant on its board ({experiment, results file}), waits
  /// up to `wait_s` for rank 0 to record its own outcome, then fails the run with the crash ahead
  /// of it. Where the database cannot be read from this host, the crash is only printed.
  using RunPlace = std::function<std::pair<std::string, std::string>(const std::string& variant)>;
  struct OutsideRank {
    int rank = 0, world = 1;
    RunPlace place;
    int wait_s = 30;
  };
  ChildEnd settle_outside_rank(pid_t pid, int status, const OutsideRank& outside, const Forced& forced = {}) const;

 private:
  int fd_ = -1;
  std::string path_;
};

/// A live child's progress, read from its board: whether it has made any within its limit,
/// runtime.stall_timeout (300 s until the child has read its config) or 10 times its slowest
/// step, whichever is longer. A child waiting in a collective is left to the collective's own
/// timeout: the rank it waits for is the one to name.
class Watchdog {
 public:
  explicit Watchdog(const ChildBoard& board);
  /// "" while the child makes progress; once it made none for its limit, what it says:
  /// "no progress for 6 s (runtime.stall_timeout 5 s)".
  std::string stalled();
  /// Whether its supervisor ends the child now: `stopped` once a stop's grace has passed
  /// (signals.h stop_now()), `stalled` once stalled() says so, else `none`.
  Forced due();

 private:
  const ChildBoard& board_;
  uint64_t beats_ = 0;
  std::chrono::steady_clock::time_point since_, read_;
};

/// Kills a child and every process of its group (a worker leads its own: launch.cpp).
void kill_child(pid_t pid);

/// Waits for the child `pid` while its watchdog and a stop's grace allow: a stalled child, or one
/// alive when the grace has passed, is killed (`forced` says which). Its wait status.
int watch_child(pid_t pid, const ChildBoard& board, Forced* forced);

/// Whether a child's wait status is a crash: a signal other than SIGINT/SIGTERM (a stop the user
/// asked for), or an exit code beyond htm's own (0, 1 after recording a failure or refusing input,
/// 2 for a usage error, 130/143 after a stop).
bool is_crash(int status);

/// "SIGSEGV (Segmentation fault)".
std::string signal_text(int signal);

/// Runs `args` (args[0]: this executable) as one supervised child sharing this terminal and
/// settles its end; prints the crash, if any. Returns the exit code to report.
int run_supervised(const std::vector<std::string>& args, const std::string& label);

}  // namespace htm
