#include "process/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "htm/error.h"
#include "process/signals.h"
#include "process/supervise.h"
#include "process/worker_fork.h"
#include "train/trainer.h"

extern char** environ;

namespace htm {
namespace {

// Worker processes: their own process group (a terminal's Ctrl-C reaches the parent alone, which
// forwards it once), signals unblocked, and HTM_WORKER_OF so they die with the parent.
class Spawner {
 public:
  Spawner() {
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("HTM_WORKER_OF=", 0) != 0 && std::string(*e).rfind("HTM_RUN_BOARD=", 0) != 0)
        base_.push_back(*e);  // a board is each child's own
    base_.push_back("HTM_WORKER_OF=" + std::to_string(getpid()));
    posix_spawnattr_init(&attr_);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr_, &none);
    posix_spawnattr_setpgroup(&attr_, 0);
    posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  }
  ~Spawner() { posix_spawnattr_destroy(&attr_); }
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  /// Starts `args` (args[0]: this executable) with `environment` added; output to `log` if given.
  pid_t spawn(std::vector<std::string> args, const std::vector<std::string>& environment = {},
              const std::string& log = "") {
    std::vector<std::string> env = base_;
    env.insert(env.end(), environment.begin(), environment.end());
    if (may_fork_worker(args, env)) return fork_worker(args, env, log);  // a copy: libtorch loaded already
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    if (!log.empty()) {
      posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&files, 1, 2);
    }
    pid_t pid;
    const int rc = posix_spawn(&pid, argv[0], &files, &attr_, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    if (rc != 0) throw Error("cannot start a worker process: " + std::string(std::strerror(rc)));
    remember_worker(pid);
    return pid;
  }

 private:
  std::vector<std::string> base_;
  posix_spawnattr_t attr_;
};

}  // namespace

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string self_path() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

namespace {

// `htm run FILE` with the request's options that every worker shares (not its selection).
std::vector<std::string> shared_args(const RunRequest& request) {
  std::vector<std::string> args = {self_path(), "run", request.file};
  if (request.rerun) args.push_back("--rerun");
  if (request.ignore_memory) args.push_back("--ignore-memory");
  if (request.confirm) args.push_back("--confirm");
  if (request.verbosity == 0) args.push_back("--quiet");
  if (request.verbosity == 2) args.push_back("--verbose");
  for (const auto& t : request.tags) args.insert(args.end(), {"--tag", t});
  if (!request.note.empty()) args.insert(args.end(), {"--note", request.note});
  for (const auto& o : request.overrides) args.insert(args.end(), {"--set", o});
  for (const auto& w : request.sweeps) args.insert(args.end(), {"--sweep", w});
  return args;
}

// Each of `workers` processes gets an equal part of the usable cores, unless runtime.threads is set.
void add_threads(std::vector<std::string>& args, const RunRequest& request, unsigned workers) {
  for (const auto& o : request.overrides)
    if (o.rfind("runtime.threads", 0) == 0) return;
  const int64_t cores = usable_cores();
  args.insert(args.end(), {"--set", "runtime.threads=" + std::to_string(std::max<int64_t>(1, cores / workers))});
}

// A TCP port nobody listens on now (the kernel's choice), for rank 0's rendezvous.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  if (port == 0) throw Error("cannot find a free TCP port for the ranks' rendezvous");
  return port;
}

// The last line of a worker's log that is a progress line ("... step S/T ... ETA ...").
std::string last_progress(const std::string& log) {
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  const std::streamoff size = in.tellg();
  if (size <= 0) return "starting";
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : tail)
    if (c == '\r') c = '\n';
  std::string best = "starting";
  std::istringstream lines(tail);
  for (std::string line; std::getline(lines, line);)
    if (line.find(" ETA ") != std::string::npos) best = line;
  return best;
}

// A finished worker's log without its progress lines: what a non-TTY run would have printed.
void print_outcome(const std::string& log) {
  std::ifstream in(log, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : text)
    if (c == '\r') c = '\n';
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.find(" ETA ") == std::string::npos) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

namespace {

// The supervised children of run_parallel(): each job's board and log, what has ended and how,
// and (live) the block of progress lines redrawn on the terminal.
class JobPool {
 public:
  JobPool(const RunRequest& request, const std::vector<std::pair<std::string, int64_t>>& work, std::string logs,
          const RecordUnclaimed& record_unclaimed)
      : request_(request),
        work_(work),
        logs_(std::move(logs)),
        record_unclaimed_(record_unclaimed),
        live_(request.jobs > 1 && isatty(fileno(stderr)) && request.verbosity >= 1) {
    if (live_) std::filesystem::create_directories(logs_);
  }

  /// Until every run has started and ended (or an interrupt or a refusal stops the starting).
  /// Each live job is watched (supervise.h): a stalled one is killed and its run failed, the
  /// study goes on; when a stop's grace has passed, every job left is killed.
  void run() {
    auto drawn = std::chrono::steady_clock::now();
    while (may_start() || !jobs_.empty()) {
      if (may_start() && static_cast<int>(jobs_.size()) < request_.jobs) {
        start(work_[next_++]);
        continue;
      }
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        finished(pid, status);
        continue;
      }
      if (pid < 0 && errno == ECHILD) jobs_.clear();
      watch();
      if (live_ && std::chrono::steady_clock::now() - drawn >= std::chrono::milliseconds(250)) {
        erase_block();
        draw_block();
        drawn = std::chrono::steady_clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (live_) erase_block();
  }

  /// What is left to say once run() returned; the exit code.
  int end() const {
    if (interrupt_requested()) {
      for (size_t i = next_; i < work_.size(); ++i)
        std::fprintf(stderr, "[%s seed %lld] not started (interrupted before its turn)\n", work_[i].first.c_str(),
                     static_cast<long long>(work_[i].second));
      return 130;
    }
    if (refused_ && next_ < work_.size())
      std::fprintf(stderr, "htm: %zu run(s) not started: %s (the error above)\n", work_.size() - next_,
                   corrupt_ ? "the results database is malformed" : "the input was refused");
    if (!failures_.empty()) {
      std::string list;
      for (const auto& f : failures_) list += (list.empty() ? "" : ", ") + f;
      std::fprintf(stderr, "htm: %zu of %zu runs failed (%s); htm runs shows why\n", failures_.size(), work_.size(),
                   list.c_str());
    }
    return worst_;
  }

 private:
  struct Job {
    std::string label, log;
    std::unique_ptr<ChildBoard> board;
    std::string variant;
    int64_t seed = 0;
    std::unique_ptr<Watchdog> watchdog;
    Forced forced;  ///< why this supervisor killed it, if it did
  };

  void watch() {
    for (auto& [pid, job] : jobs_) {
      if (job.forced.kind != Forced::Kind::none) continue;  // killed: reaped next
      if ((job.forced = job.watchdog->due()).kind != Forced::Kind::none) kill_child(pid);
    }
  }

  bool may_start() const { return next_ < work_.size() && !interrupt_requested() && !refused_; }

  void start(const std::pair<std::string, int64_t>& item) {
    const auto& [variant, seed] = item;
    std::vector<std::string> args = shared_args(request_);
    args.insert(args.end(), {"--variant", variant, "--seed", std::to_string(seed)});
    if (request_.jobs > 1 && work_.size() > 1) add_threads(args, request_, static_cast<unsigned>(request_.jobs));
    Job job{variant + " seed " + std::to_string(seed), "", std::make_unique<ChildBoard>(), variant, seed, nullptr, {}};
    job.watchdog = std::make_unique<Watchdog>(*job.board);
    if (live_) job.log = logs_ + "/" + run_file_name(variant, seed) + ".log";
    const pid_t pid = spawner_.spawn(args, {job.board->environment()}, job.log);
    jobs_[pid] = std::move(job);
  }

  void finished(pid_t pid, int status) {
    auto found = jobs_.find(pid);
    if (found == jobs_.end()) return;
    forget_worker(pid);
    if (live_) {
      erase_block();
      print_outcome(found->second.log);
    }
    const Job& job = found->second;
    const ChildEnd end = job.board->settle(pid, status, job.forced);
    if (end.crashed)
      std::fprintf(stderr, "error: [%s] %s\n", (end.label.empty() ? job.label : end.label).c_str(),
                   end.message.c_str());
    else if (!end.message.empty())
      std::fprintf(stderr, "[%s] %s\n", (end.label.empty() ? job.label : end.label).c_str(), end.message.c_str());
    if (end.crashed && !end.claimed && record_unclaimed_) {  // no row yet: htm runs shows the attempt
      try {
        record_unclaimed_(job.variant, job.seed, end.message);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: [%s] recording the crash failed: %s\n", job.label.c_str(), e.what());
      }
    }
    corrupt_ |= end.database_corrupt;
    if ((end.code == 1 && !end.claimed && !end.crashed) || end.database_corrupt) refused_ = true;
    if (end.code == 1 && (end.claimed || end.crashed))
      failures_.push_back(end.run_id > 0 ? "run " + std::to_string(end.run_id) : job.label);
    jobs_.erase(found);
    ++done_;
    worst_ = std::max(worst_, end.code);
  }

  void erase_block() {
    for (; drawn_ > 0; --drawn_) std::fprintf(stderr, "\x1b[1A\x1b[2K");
  }
  void draw_block() {
    std::fprintf(stderr, "jobs: %zu done, %zu running, %zu left\n", done_, jobs_.size(), work_.size() - next_);
    for (const auto& [pid, job] : jobs_) std::fprintf(stderr, "  %.150s\n", last_progress(job.log).c_str());
    drawn_ = 1 + static_cast<int>(jobs_.size());
    std::fflush(stderr);
  }

  const RunRequest& request_;
  const std::vector<std::pair<std::string, int64_t>>& work_;
  const std::string logs_;
  const RecordUnclaimed& record_unclaimed_;
  const bool live_;
  Spawner spawner_;
  std::map<pid_t, Job> jobs_;
  size_t next_ = 0, done_ = 0;
  int worst_ = 0, drawn_ = 0;
  bool refused_ = false;  // a child refused its input before any run existed: the others would too
  bool corrupt_ = false;  // a child met a malformed database: nothing more goes into it
  std::vector<std::string> failures_;
};

}  // namespace

// Each variant × seed in a supervised child process, request.jobs at a time (docs/reliability.md):
// a child that crashes costs its run, which is recorded failed with the signal, the plugin and
// the step, and the study goes on. Children get their own process group (a terminal's Ctrl-C
// reaches the parent alone, which forwards it once) and die with the parent (HTM_WORKER_OF: they
// ask the kernel for SIGTERM when it goes). One at a time, a child shares this terminal; with
// --jobs N on a terminal they write to log files under `logs` and the parent keeps one live line
// per running job.
int run_parallel(const RunRequest& request, const std::vector<std::pair<std::string, int64_t>>& work,
                 const std::string& logs, const RecordUnclaimed& record_unclaimed) {
  JobPool pool(request, work, logs, record_unclaimed);
  pool.run();
  return pool.end();
}

bool crashed_in_this_launch(const std::string& label) {
  const char* crashed = std::getenv("HTM_CRASHED_RUNS");
  if (crashed == nullptr) return false;
  std::istringstream lines(crashed);
  for (std::string line; std::getline(lines, line);)
    if (line == label) return true;
  return false;
}

int run_ranks(const RunRequest& request, size_t runs, const RecordUnclaimed& record_unclaimed, int grace_s) {
  std::vector<std::string> args = shared_args(request);
  for (const auto& v : request.variants) args.insert(args.end(), {"--variant", v});
  for (auto seed : request.seeds) args.insert(args.end(), {"--seed", std::to_string(seed)});
  if (!request.shard.empty()) args.insert(args.end(), {"--shard", request.shard});
  add_threads(args, request, static_cast<unsigned>(request.nproc));
  int worst = 0;
  std::string skipped;  // labels of the runs that crashed, one a line
  for (size_t crashes = 0; crashes < runs; ++crashes) {
    std::string crashed;
    std::vector<std::string> environment;
    if (!skipped.empty()) environment.push_back("HTM_CRASHED_RUNS=" + skipped);
    RankLaunch launch;
    launch.grace_s = grace_s;
    launch.crashed = &crashed;
    launch.environment = std::move(environment);
    launch.record_unclaimed = record_unclaimed;
    worst = std::max(worst, launch_ranks(args, request.nproc, launch));
    if (crashed.empty() || interrupt_requested() || crashes + 1 == runs) break;
    skipped += crashed + "\n";
    std::fprintf(stderr, "htm: the ranks start again for the study's other runs\n");
  }
  return worst;
}

int run_outside_rank(const RunRequest& request, int rank, int world, const ChildBoard::RunPlace& place) {
  std::vector<std::string> args = shared_args(request);
  for (const auto& v : request.variants) args.insert(args.end(), {"--variant", v});
  for (auto seed : request.seeds) args.insert(args.end(), {"--seed", std::to_string(seed)});
  if (!request.shard.empty()) args.insert(args.end(), {"--shard", request.shard});
  ChildBoard board;
  const pid_t pid = start_worker(args, {board.environment()}, "");
  Forced forced;
  const int status = watch_child(pid, board, &forced);
  const ChildEnd end = board.settle_outside_rank(pid, status, {rank, world, place}, forced);
  if (end.crashed)
    std::fprintf(stderr, "error: [%s] %s\n", end.label.c_str(), end.message.c_str());
  else if (!end.message.empty())
    std::fprintf(stderr, "[%s] %s\n", end.label.c_str(), end.message.c_str());
  return end.code;
}

int run_child(const std::vector<std::string>& args, const std::string& log) {
  return exit_code(wait_worker(start_worker(args, {}, log)));
}

pid_t start_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment,
                   const std::string& log) {
  Spawner spawner;
  return spawner.spawn(args, environment, log);
}

int wait_worker(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  forget_worker(pid);
  return status;
}

int launch_ranks(const std::vector<std::string>& args, int n, const RankLaunch& launch) {
  const int grace_s = launch.grace_s;
  const int port = free_port();
  Spawner spawner;
  std::map<pid_t, int> ranks;  // pid → rank
  // Each rank is supervised as a single run is: it publishes its step and plugin on a board of
  // its own (rank 0 also the run it claimed), read when it crashes.
  std::vector<std::unique_ptr<ChildBoard>> boards;
  std::vector<pid_t> pids(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    boards.push_back(std::make_unique<ChildBoard>());
    std::vector<std::string> env = {"RANK=" + std::to_string(r),       "WORLD_SIZE=" + std::to_string(n),
                                    "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=" + std::to_string(n),
                                    "MASTER_ADDR=127.0.0.1",           "MASTER_PORT=" + std::to_string(port),
                                    boards.back()->environment()};
    env.insert(env.end(), launch.environment.begin(), launch.environment.end());
    const pid_t pid = spawner.spawn(args, env, r == 0 ? launch.rank0_log : "");
    ranks[pid] = r;
    pids[static_cast<size_t>(r)] = pid;
  }
  int crashed_rank = -1, crashed_status = 0, rank0_status = 0;
  int rank0 = 0, worst = 0;
  std::chrono::steady_clock::time_point deadline{};
  bool failed = false, terminated = false;
  Forced forced;  // a stall this launcher found, or a stop whose grace passed: every rank killed
  std::vector<std::unique_ptr<Watchdog>> watchdogs;
  for (const auto& board : boards) watchdogs.push_back(std::make_unique<Watchdog>(*board));
  const auto kill_all = [&] {
    for (const auto& [p, r] : ranks) kill_child(p);
    terminated = true;
  };
  while (!ranks.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      auto found = ranks.find(pid);
      if (found == ranks.end()) continue;
      forget_worker(pid);
      const int code = exit_code(status);
      if (found->second == 0) rank0 = code, rank0_status = status;
      worst = std::max(worst, code);
      if (is_crash(status) && crashed_rank < 0 && !(terminated && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        crashed_rank = found->second;  // the first to crash (not one this launcher killed)
        crashed_status = status;
      }
      if (code != 0 && code != 130 && !failed && !terminated) {  // the others notice at their next collective
        failed = true;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
        std::fprintf(stderr, "htm: rank %d ended with %s %d; the other ranks stop within %d s\n", found->second,
                     WIFEXITED(status) ? "exit code" : "signal", WIFEXITED(status) ? code : WTERMSIG(status), grace_s);
      }
      ranks.erase(found);
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    for (const auto& [p, r] : ranks) {  // a stop ends every rank; the first rank found stalled is named
      if (forced.kind != Forced::Kind::none) break;
      const Forced due = watchdogs[static_cast<size_t>(r)]->due();
      if (due.kind == Forced::Kind::none || (due.kind == Forced::Kind::stalled && failed)) continue;
      forced = due;
      if (due.kind == Forced::Kind::stalled) {
        crashed_rank = r;
        crashed_status = SIGKILL;  // as waitpid shows a kill
        std::fprintf(stderr, "htm: rank %d made no progress: %s; every rank is stopped\n", r, due.what.c_str());
      }
      kill_all();
    }
    if (failed && std::chrono::steady_clock::now() > deadline) {
      for (const auto& [p, r] : ranks) kill(p, terminated ? SIGKILL : SIGTERM);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      terminated = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (forced.kind == Forced::Kind::stopped || (crashed_rank < 0 && stop_signal() != 0)) {
    // stopped by a signal: the run rank 0 claimed is interrupted, resumable
    const ChildEnd end = boards[0]->settle(pids[0], rank0_status, forced);
    if (!end.message.empty()) std::fprintf(stderr, "[%s] %s\n", end.label.c_str(), end.message.c_str());
    return 128 + (stop_signal() != 0 ? stop_signal() : SIGTERM);
  }
  if (crashed_rank >= 0) {  // every rank has ended: the run rank 0 claimed is failed with the crash
    const ChildEnd end = boards[static_cast<size_t>(crashed_rank)]->settle_rank(crashed_status, crashed_rank, n,
                                                                                *boards[0], pids[0], forced);
    if (launch.crashed != nullptr) *launch.crashed = end.label;
    if (end.crashed) {
      std::fprintf(stderr, "error: [%s] %s\n", end.label.c_str(), end.message.c_str());
      if (!end.claimed && !end.variant.empty() && launch.record_unclaimed) {  // no row yet: htm runs shows the attempt
        try {
          launch.record_unclaimed(end.variant, end.seed, end.message);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "error: [%s] recording the crash failed: %s\n", end.label.c_str(), e.what());
        }
      }
      return 1;
    }
  }
  return worst != 0 && worst != rank0 ? std::max(worst, rank0 == 0 ? 1 : rank0) : rank0;
}

}  // namespace htm
