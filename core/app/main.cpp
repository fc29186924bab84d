// htm: run experiments, list plugins, query results. See `htm --help`.
#include "commands/commands.h"
#include "process/signals.h"

int main(int argc, char** argv) {
  htm::install_signal_thread();  // before any thread starts, so every thread inherits the mask
  return htm::dispatch(argc, argv);
}
