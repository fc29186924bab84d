// The `htm` subcommands' registry (commands/command_registry.h).
#include "commands/command_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace htm {
namespace {

// Filled during static initialisation, by registrars in any order: a function-local static, so
// that it exists before the first of them.
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> commands;
  return commands;
}

}  // namespace

RegisterCommand::RegisterCommand(int order, const char* name, const char* summary, int (*run)(const Args&)) {
  for (const auto& c : registry())
    if (std::strcmp(c.name, name) == 0) {  // a programming error, found before main
      std::fprintf(stderr, "htm: the command '%s' is registered twice\n", name);
      std::abort();
    }
  registry().push_back({name, summary, run, order});
}

std::vector<CommandInfo> registered_commands() {
  std::vector<CommandInfo> commands = registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const CommandInfo& a, const CommandInfo& b) { return a.order < b.order; });
  return commands;
}

}  // namespace htm
