#include "process/signals.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "train/trainer.h"

namespace htm {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_graceful{false};
constexpr int kGrace = 30;  // runtime.stop_grace until a run sets it
std::atomic<int> g_grace{kGrace};
std::atomic<int> g_signal{0};        // the first signal
std::atomic<int64_t> g_first_ns{0};  // when it came (steady clock)
std::atomic<bool> g_second{false};   // a second one came
std::mutex g_workers_mutex;
std::vector<pid_t> g_workers;

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

bool has_workers() {
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  return !g_workers.empty();
}

void pass_on(int signal) {
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  for (pid_t pid : g_workers) kill(pid, signal);
}

// The last resort: every worker's process group killed, this process ended. The supervisor's own
// loop kills and records before this fires (at the grace); this covers a main thread that is stuck.
[[noreturn]] void end_everything(int signal) {
  {
    std::lock_guard<std::mutex> lock(g_workers_mutex);
    for (pid_t pid : g_workers) {
      kill(-pid, SIGKILL);  // a worker leads its own process group (launch.cpp)
      kill(pid, SIGKILL);
    }
  }
  std::_Exit(128 + signal);
}

void end_after(int seconds, int signal) {
  std::thread([seconds, signal] {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    end_everything(signal);
  }).detach();
}

}  // namespace

void install_signal_thread() {
  static const bool forks_handled = [] {  // a fork with the list locked would leave it locked in the copy
    pthread_atfork([] { g_workers_mutex.lock(); }, [] { g_workers_mutex.unlock(); }, [] { g_workers_mutex.unlock(); });
    return true;
  }();
  (void)forks_handled;
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  const char* parent = std::getenv("HTM_WORKER_OF");
  const pid_t parent_pid = parent != nullptr ? static_cast<pid_t>(std::atoll(parent)) : 0;
  std::thread([set, parent_pid] {
    for (int received = 0;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      // The kernel sends the parent-death signal as the dying parent's threads go, the child
      // handed from thread to thread: several SIGTERMs, not a second signal to end the run at
      // once. An orphan keeps its first; its grace's timer ends it if it cannot stop.
      if (parent_pid != 0 && signal == SIGTERM && received > 0 && getppid() != parent_pid) continue;
      pass_on(signal);
      ++received;
      if (received == 1 && g_graceful) {
        g_signal = signal;
        g_first_ns = now_ns();
        request_interrupt();
        end_after(g_grace + 4, signal);
        continue;
      }
      if (received == 2 && g_graceful && has_workers()) {  // the supervisor kills and records at once
        g_second = true;
        end_after(5, signal);
        continue;
      }
      if (received >= 2 || !g_graceful) end_everything(signal);  // nothing to stop gracefully, or asked thrice
    }
  }).detach();
  if (parent_pid != 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent_pid) kill(getpid(), SIGTERM);  // it died already
  }
}

void restart_signal_thread_in_copy() {
  g_workers.clear();  // the parent's workers are not this process's
  g_graceful = false;
  g_grace = kGrace;
  g_signal = 0;
  g_first_ns = 0;
  g_second = false;
  install_signal_thread();
}

void set_graceful_stop(bool graceful) { g_graceful = graceful; }

void set_stop_grace(int seconds) { g_grace = std::max(0, seconds); }

int stop_grace() { return g_grace; }

bool stop_now() {
  if (g_second) return true;
  const int64_t first = g_first_ns;
  return first != 0 && now_ns() - first >= static_cast<int64_t>(g_grace) * 1000000000;
}

int stop_signal() { return g_signal; }

bool second_signal() { return g_second; }

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
