// SIGINT and SIGTERM, handled by a thread that waits for them (sigwait) instead of a handler:
// a handler can run on any thread at any instruction, including inside oneDNN's JIT GEMM whose
// stack pointer may sit in heap memory, and a signal frame pushed there corrupts the heap.
// The first signal asks the run to stop at its next step (it checkpoints and records itself
// interrupted) and is passed on to --jobs workers; a second one ends the process at once.
#pragma once

#include <sys/types.h>

namespace htm {

/// Blocks SIGINT/SIGTERM in this and every later thread and starts the waiting thread. Call
/// first thing in main, before any thread exists. A worker started by `htm run --jobs`
/// (HTM_WORKER_OF set) also asks for SIGTERM when its parent dies.
void install_signal_thread();
/// Whether the first signal stops gracefully (a run in progress) or ends the process at once.
void set_graceful_stop(bool graceful);
/// The --jobs workers a signal is passed on to.
void remember_worker(pid_t pid);
void forget_worker(pid_t pid);
/// Unblocks the signals again (before exec'ing another program).
void unblock_signals();

}  // namespace htm
