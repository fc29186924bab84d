// htm: run experiments, list plugins, query results. See `htm --help`.
#include "board/run_board.h"
#include "commands/commands.h"
#include "process/signals.h"
#include "process/worker_fork.h"

int main(int argc, char** argv) {
  htm::open_run_board();                  // a supervised child's board, its name removed before anything can end us
  htm::install_signal_thread();           // before any thread starts, so every thread inherits the mask
  htm::set_worker_entry(htm::dispatch);   // a worker may be a copy of this process, running this
  htm::leave(htm::dispatch(argc, argv));  // no static destructors (worker_fork.h says why)
}
