// SIGINT and SIGTERM, handled by a thread that waits for them (sigwait) instead of a handler:
// a handler can run on any thread at any instruction, including inside oneDNN's JIT GEMM whose
// stack pointer may sit in heap memory, and a signal frame pushed there corrupts the heap.
// The first signal asks the run to stop at its next step (it checkpoints and records itself
// interrupted) and is passed on to the worker processes; they get runtime.stop_grace seconds,
// then their supervisor kills what is left and records it interrupted (stop_now()). A second
// signal makes stop_now() true at once in a supervisor, and ends any other process at once.
// Whatever the process is doing, it is gone within the grace + 5 s of the first signal, and 5 s
// after a second one (docs/reliability.md).
#pragma once

#include <sys/types.h>

namespace htm {

/// Blocks SIGINT/SIGTERM in this and every later thread and starts the waiting thread. Call
/// first thing in main, before any thread exists. A worker started by `htm run --jobs`
/// (HTM_WORKER_OF set) also asks for SIGTERM when its parent dies.
void install_signal_thread();
/// In a copy of this process (process/worker_fork.h), whose signal thread the fork left behind:
/// the signal state a new process starts with, and a new thread.
void restart_signal_thread_in_copy();
/// Whether the first signal stops gracefully (a run in progress) or ends the process at once.
void set_graceful_stop(bool graceful);
/// The seconds a stop waits for the workers (runtime.stop_grace; 30 until set).
void set_stop_grace(int seconds);
int stop_grace();
/// In a supervisor: a signal came and its workers are to be killed now (the grace has passed
/// since the first signal, or a second signal came).
bool stop_now();
/// The signal that stopped this process (SIGINT, SIGTERM), 0 when none came; whether a second came.
int stop_signal();
bool second_signal();
/// The --jobs workers a signal is passed on to.
void remember_worker(pid_t pid);
void forget_worker(pid_t pid);
/// Unblocks the signals again (before exec'ing another program).
void unblock_signals();

}  // namespace htm
