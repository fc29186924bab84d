#include "process/supervise.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "board/run_board.h"
#include "config/settings.h"
#include "htm/error.h"
#include "process/launch.h"
#include "process/signals.h"
#include "store/results_store.h"
#include "train/trainer.h"

namespace htm {

bool supervised_child() {
  const char* board = std::getenv("HTM_RUN_BOARD");
  return board != nullptr && *board != '\0';
}

std::string signal_text(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  const std::string name = abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
  const char* text = strsignal(signal);
  return text != nullptr ? name + " (" + text + ")" : name;
}

ChildBoard::ChildBoard() : path_(create_run_board(&fd_)) {}

ChildBoard::~ChildBoard() {
  unlink(path_.c_str());  // a child that never opened it (it failed to start) leaves the name
  close(fd_);
}

std::string ChildBoard::environment() const { return "HTM_RUN_BOARD=" + path_; }

bool ChildBoard::read(RunBoard* out) const { return read_run_board(fd_, out); }

bool is_crash(int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) != SIGINT && WTERMSIG(status) != SIGTERM;
  const int code = exit_code(status);
  return code > 2 && code != 130 && code != 143;
}

namespace {

// What settle_board says of a crash beyond the board: the rank (" (rank 1 of 4)", "" for a run
// alone), whether it fails rank 0's run even after that recorded an outcome (record_rank_crash),
// and what follows the line when no run was claimed.
struct CrashText {
  std::string rank;
  bool rank_crash = false;
  std::string unclaimed = " during construction (before it claimed its run)";
};

ChildEnd settle_board(RunBoard board, bool read, pid_t pid, int status, const Forced& forced, const CrashText& text) {
  const std::string& rank = text.rank;
  const bool rank_crash = text.rank_crash;
  const std::string& unclaimed = text.unclaimed;
  ChildEnd end;
  end.code = exit_code(status);
  end.claimed = read && board.run_id > 0;
  end.run_id = end.claimed ? board.run_id : 0;
  if (read && (end.claimed || board.variant[0] != '\0')) end.label = board.label;
  if (read) {
    end.variant = board.variant;
    end.seed = board.seed;
  }
  end.database_corrupt = read && board.database_corrupt != 0;
  const bool stalled = forced.kind == Forced::Kind::stalled;
  // A stop the user asked for leaves the run resumable: recorded interrupted here when the child
  // could not say so itself (killed after the grace, or ended at once by a second signal).
  if (!stalled && (forced.kind == Forced::Kind::stopped || (!is_crash(status) && stop_signal() != 0))) {
    const int stopped = 128 + (stop_signal() != 0 ? stop_signal() : SIGTERM);
    if (forced.kind == Forced::Kind::stopped) end.code = stopped;
    if (!end.claimed) return end;
    std::string how;
    if (second_signal())
      how = "; ended at a second signal";
    else if (forced.kind == Forced::Kind::stopped)
      how = "; its process did not stop within " + std::to_string(stop_grace()) + " s and was killed";
    try {
      ResultsStore store(board.db);
      if (store.record_interrupted(board.run_id, pid,
                                   "interrupted by " + signal_text(stop_signal()) + how + "; htm run resumes it"))
        end.message = "run " + std::to_string(board.run_id) + " recorded interrupted" + how, end.code = stopped;
    } catch (const std::exception& e) {
      end.message = "run " + std::to_string(board.run_id) + ": recording it interrupted failed: " + e.what();
    }
    return end;
  }
  // Nor are htm's own exit codes: the child said it all.
  if (!stalled && !is_crash(status)) return end;
  std::string what;
  if (stalled) {
    what = "stalled: " + forced.what;
  } else if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    what = "crashed: " + signal_text(signal);
    if (signal == SIGKILL) what += ", sent by the kernel's out-of-memory killer or by kill -9,";
  } else {
    what = "its process exited with code " + std::to_string(end.code) + " without recording an outcome,";
  }
  const std::string plugin = read ? board_plugin_text(board, stalled) : "";
  if (stalled)  // where it stopped moving: the call, else the phase
    what += plugin.empty() ? " while " + std::string(board_phase_text(static_cast<BoardPhase>(board.phase)))
                           : " in " + plugin;
  else
    what += plugin.empty() ? " while no plugin call was in progress" : " in " + plugin;
  if (read && board.step > 0)
    what += " at step " + std::to_string(board.step) + " of " + std::to_string(board.total_steps);
  else if (end.claimed)
    what += " before its first step";
  what += rank;
  if (stalled) what += "; the watchdog killed its processes";
  if (!end.claimed) {  // nothing was recorded: say so on the terminal, there is no row to hold it
    if (WIFSIGNALED(status) || stalled) {
      end.crashed = true;
      end.code = 1;
      end.message = what + unclaimed;
    }
    return end;
  }
  try {
    ResultsStore store(board.db);
    const int64_t crashes = rank_crash ? store.record_rank_crash(board.run_id, pid, board.step, what)
                                       : store.record_crash(board.run_id, pid, board.step, what);
    if (crashes == 0) return end;  // the child recorded its outcome itself (a plain failure)
    end.crashed = true;
    end.code = 1;
    end.message = "run " + std::to_string(board.run_id) + " " + what;
    if (crashes >= kCrashesHeld)
      end.message += "; it crashed there " + std::to_string(crashes) +
                     " times, so htm run does not resume it (htm resume " + std::to_string(board.run_id) +
                     " --force retries it)";
  } catch (const std::exception& e) {
    end.crashed = true;
    end.code = 1;
    end.message = "run " + std::to_string(board.run_id) + " " + what + "; recording it failed: " + e.what();
  }
  return end;
}

}  // namespace

ChildEnd ChildBoard::settle(pid_t pid, int status, const Forced& forced) const {
  RunBoard board{};
  const bool read = read_run_board(fd_, &board);
  return settle_board(board, read, pid, status, forced, {});
}

ChildEnd ChildBoard::settle_rank(int status, int rank, int world, const ChildBoard& rank0, pid_t rank0_pid,
                                 const Forced& forced) const {
  RunBoard board{}, first{};
  bool read = read_run_board(fd_, &board);
  if (read_run_board(rank0.fd_, &first) && first.run_id > 0) {  // the run is rank 0's claim
    board.run_id = first.run_id;
    std::memcpy(board.db, first.db, sizeof board.db);
    std::memcpy(board.label, first.label, sizeof board.label);
    std::memcpy(board.variant, first.variant, sizeof board.variant);
    board.seed = first.seed;
    if (!read) {  // this rank wrote nothing: no plugin or step to name
      std::memcpy(board.magic, first.magic, sizeof board.magic);
      board.step = 0;
      board.count = 0;
      board.current = -1;
      read = true;
    }
  }
  return settle_board(board, read, rank0_pid, status, forced,
                      {" (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")", true});
}

ChildEnd ChildBoard::settle_outside_rank(pid_t pid, int status, const OutsideRank& outside,
                                         const Forced& forced) const {
  const int rank = outside.rank, world = outside.world, wait_s = outside.wait_s;
  const RunPlace& place = outside.place;
  RunBoard board{};
  const bool read = read_run_board(fd_, &board);
  const std::string of = " (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")";
  if (rank == 0 || !read || board.variant[0] == '\0' || board.run_id > 0)
    return settle_board(board, read, pid, status, forced, {of});
  if (forced.kind != Forced::Kind::stalled && !is_crash(status))
    return settle_board(board, read, pid, status, forced, {of});
  // Rank 0 claimed the run and records its own outcome once it notices (its next collective):
  // the crash goes ahead of that, as under --nproc.
  try {
    const auto [experiment, results] = place(board.variant);
    ResultsStore store(results, OpenMode::read_only);
    const std::string sql =
        "SELECT r.id, r.owner_pid, r.status FROM runs r JOIN experiments e ON e.id = r.experiment_id "
        "WHERE e.name = ? AND r.variant = ? AND r.seed = ? ORDER BY r.id DESC LIMIT 1";
    const std::vector<SqlValue> params = {experiment, std::string(board.variant), static_cast<int64_t>(board.seed)};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    QueryResult row = store.query(sql, params);
    while (!row.rows.empty() && row.rows[0][2] == "running" && std::chrono::steady_clock::now() < deadline &&
           !interrupt_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      row = store.query(sql, params);
    }
    if (!row.rows.empty()) {
      board.run_id = std::stoll(row.rows[0][0]);
      std::snprintf(board.db, sizeof board.db, "%s", results.c_str());
      return settle_board(board, true, static_cast<pid_t>(std::stoll(row.rows[0][1])), status, forced, {of, true});
    }
  } catch (const std::exception& e) {  // printed, not recorded
    return settle_board(board, read, pid, status, forced, {of, false, "; not recorded: " + std::string(e.what())});
  }
  return settle_board(board, read, pid, status, forced, {of, false, "; not recorded: rank 0 claimed no run for it"});
}

Watchdog::Watchdog(const ChildBoard& board) : board_(board), since_(std::chrono::steady_clock::now()), read_(since_) {}

std::string Watchdog::stalled() {
  const auto now = std::chrono::steady_clock::now();
  if (now - read_ < std::chrono::milliseconds(500)) return "";  // the board is read twice a second
  read_ = now;
  RunBoard board{};
  if (!board_.read(&board)) return "";
  if (board.beats != beats_ || board.phase == static_cast<int32_t>(BoardPhase::collective)) {
    beats_ = board.beats;
    since_ = now;
    return "";
  }
  const int64_t timeout = board.stall_timeout_s < 0 ? kDefaultStallTimeout : board.stall_timeout_s;
  if (timeout == 0) return "";
  const int64_t limit = std::max(timeout, (10 * board.slowest_step_ms + 999) / 1000);
  const auto quiet = std::chrono::duration_cast<std::chrono::seconds>(now - since_).count();
  if (quiet < limit) return "";
  std::string what =
      "no progress for " + std::to_string(quiet) + " s (runtime.stall_timeout " + std::to_string(timeout) + " s";
  return what + (limit > timeout ? ", 10 times its slowest step " + std::to_string(limit) + " s)" : ")");
}

Forced Watchdog::due() {
  if (stop_now()) return {Forced::Kind::stopped, ""};
  if (std::string what = stalled(); !what.empty()) return {Forced::Kind::stalled, what};
  return {};
}

void kill_child(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

int watch_child(pid_t pid, const ChildBoard& board, Forced* forced) {
  Watchdog watchdog(board);
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) {
      forget_worker(pid);
      return status;
    }
    if (forced->kind == Forced::Kind::none && (*forced = watchdog.due()).kind != Forced::Kind::none) kill_child(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int run_supervised(const std::vector<std::string>& args, const std::string& label) {
  ChildBoard board;
  const pid_t pid = start_worker(args, {board.environment()}, "");
  Forced forced;
  const int status = watch_child(pid, board, &forced);
  const ChildEnd end = board.settle(pid, status, forced);
  if (end.crashed)
    std::fprintf(stderr, "error: [%s] %s\n", (end.label.empty() ? label : end.label).c_str(), end.message.c_str());
  else if (!end.message.empty())
    std::fprintf(stderr, "[%s] %s\n", (end.label.empty() ? label : end.label).c_str(), end.message.c_str());
  return end.code;
}

}  // namespace htm
