#include "process/worker_fork.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "board/run_board.h"
#include "htm/error.h"
#include "process/launch.h"
#include "process/signals.h"
#include "train/trainer.h"

namespace htm {
namespace {

WorkerEntry g_entry = nullptr;

int threads_running() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// Whether CUDA's libraries are in this process (a CUDA libtorch): a process that initialised
// CUDA cannot use it in a fork, and whether the supervisor did is not asked of torch, which
// would initialise it.
bool cuda_loaded() {
  return dl_iterate_phdr(
             [](dl_phdr_info* info, size_t, void*) {
               const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
               const std::string name = path.substr(path.rfind('/') + 1);  // npos + 1 = 0: the whole
               return static_cast<int>(name.rfind("libcuda.", 0) == 0 || name.rfind("libcudart", 0) == 0 ||
                                       name.rfind("libtorch_cuda", 0) == 0);
             },
             nullptr) != 0;
}

// What exec would close: every descriptor above stderr marked close-on-exec (SQLite's database
// and journal files, sockets), so the copy holds no more of the parent's files than a new
// process would.
void close_on_exec_descriptors() {
  std::vector<int> marked;
  if (DIR* dir = opendir("/proc/self/fd")) {
    const int own = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > 2 && fd != own && (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0) marked.push_back(fd);
    }
    closedir(dir);
  }
  for (int fd : marked) close(fd);
}

// noexcept: whatever escapes ends the copy as an uncaught exception ends a new process, and never
// unwinds into the supervisor's code it was forked from.
[[noreturn]] void become_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment,
                                const std::string& log) noexcept {
  setpgid(0, 0);
  clearenv();
  for (const auto& e : environment) putenv(strdup(e.c_str()));  // the environment keeps the strings
  if (!log.empty()) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) std::_Exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  close_on_exec_descriptors();
  open_run_board();  // as main does: mapped and its name removed before a signal can end the copy
  // stdout buffered as a new process's would be: by line on a terminal, in blocks elsewhere.
  std::setvbuf(stdout, nullptr, isatty(1) ? _IOLBF : _IOFBF, BUFSIZ);
  restart_signal_thread_in_copy();
  reset_interrupt();
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_current_seed(c10::default_rng_seed_val);
  if (std::find(args.begin(), args.end(), "--verbose") != args.end())
    std::fprintf(stderr, "htm: worker %d is a copy of its supervisor %d (libtorch loaded once)\n",
                 static_cast<int>(getpid()), static_cast<int>(getppid()));
  std::vector<std::string> words = args;
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  leave(g_entry(static_cast<int>(words.size()), argv.data()));
}

}  // namespace

void set_worker_entry(WorkerEntry entry) { g_entry = entry; }

void leave(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

bool may_fork_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment) {
  const char* how = std::getenv("HTM_WORKER_SPAWN");
  if (how != nullptr && std::string(how) == "exec") return false;
  if (args.size() < 2 || args[0] != self_path() || (args[1] != "run" && args[1] != "resume")) return false;
  for (const auto& e : environment)
    if (e.rfind("RANK=", 0) == 0) return false;
  return g_entry != nullptr && threads_running() == 2 && !cuda_loaded();  // main's thread and its signal thread
}

pid_t fork_worker(const std::vector<std::string>& args, const std::vector<std::string>& environment,
                  const std::string& log) {
  std::fflush(nullptr);  // nothing buffered here is written twice
  const pid_t pid = fork();
  if (pid == 0) become_worker(args, environment, log);
  if (pid < 0) throw Error("cannot start a worker process: " + std::string(std::strerror(errno)));
  remember_worker(pid);  // signals are passed on to it
  return pid;
}

}  // namespace htm
