// htm: run experiments, list plugins, query results. See `htm --help`.
#include <csignal>

#include "commands.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  std::signal(SIGINT, [](int) { htm::request_interrupt(); });
  std::signal(SIGTERM, [](int) { htm::request_interrupt(); });
  return htm::dispatch(argc, argv);
}
