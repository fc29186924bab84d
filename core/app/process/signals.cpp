#include "process/signals.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "train/trainer.h"

namespace htm {
namespace {

std::atomic<bool> g_graceful{false};
std::mutex g_workers_mutex;
std::vector<pid_t> g_workers;

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void pass_on(int signal) {
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  for (pid_t pid : g_workers) kill(pid, signal);
}

}  // namespace

void install_signal_thread() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (int received = 0;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      pass_on(signal);
      if (++received == 1 && g_graceful) {
        request_interrupt();
        continue;
      }
      std::_Exit(128 + signal);  // a second signal, or nothing to stop gracefully
    }
  }).detach();
  if (const char* parent = std::getenv("HTM_WORKER_OF")) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != static_cast<pid_t>(std::atoll(parent))) kill(getpid(), SIGTERM);  // it died already
  }
}

void set_graceful_stop(bool graceful) { g_graceful = graceful; }

void remember_worker(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  g_workers.push_back(pid);
}

void forget_worker(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  g_workers.erase(std::remove(g_workers.begin(), g_workers.end(), pid), g_workers.end());
}

void unblock_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace htm
