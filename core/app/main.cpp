// htm: run experiments, list plugins, query results. See `htm --help`.
#include <cstdio>
#include <cstdlib>

#include "board/run_board.h"
#include "commands/commands.h"
#include "process/signals.h"
#include "process/worker_fork.h"

int main(int argc, char** argv) {
  htm::open_run_board();                 // a supervised child's board, its name removed before anything can end us
  htm::install_signal_thread();          // before any thread starts, so every thread inherits the mask
  htm::set_worker_entry(htm::dispatch);  // a worker may be a copy of this process, running this
  const int code = htm::dispatch(argc, argv);
  // Out without the static destructors: htm's own objects are gone by now (they live in the
  // command's scopes) and stdio is flushed here, while libtorch's would undo its thousands of
  // operator registrations one by one (~0.3 s), in a forked worker copying each page it writes
  // from the supervisor's first (~0.5 s): a third of a small run's wall time.
  std::fflush(nullptr);
  std::_Exit(code);
}
