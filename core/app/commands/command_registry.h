// The `htm` subcommands as a registry (LLVM's pass registry): the file that defines a command
// registers its name, one-line summary and entry with one RegisterCommand at namespace scope, and
// the dispatcher (commands.cpp) and `htm --help` read the list. A new command is one file (and
// its line in docs/architecture.md's source map); nothing else names it.
#pragma once

#include <string>
#include <vector>

namespace htm {

using Args = std::vector<std::string>;

/// A command: `htm NAME ARGS...` runs `run(ARGS)`, whose result is the exit code.
struct CommandInfo {
  const char* name;
  const char* summary;  ///< one line for `htm --help`
  int (*run)(const Args&);
  int order;  ///< where `htm --help` lists it (ascending)
};

/// Adds a command to the registry at static initialisation (its name must be new).
class RegisterCommand {
 public:
  RegisterCommand(int order, const char* name, const char* summary, int (*run)(const Args&));
};

/// Every registered command, in `order`.
std::vector<CommandInfo> registered_commands();

}  // namespace htm
