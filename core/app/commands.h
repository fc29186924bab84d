// The `htm` subcommands. Each takes the arguments after its name and returns an exit code.
#pragma once

#include <string>
#include <vector>

namespace htm {

using Args = std::vector<std::string>;

int cmd_run(const Args& args);
int cmd_config(const Args& args);
int cmd_plugins(const Args& args);
int cmd_runs(const Args& args);
int cmd_query(const Args& args);
int cmd_merge(const Args& args);
int cmd_compare(const Args& args);
int cmd_bench(const Args& args);
int cmd_sample(const Args& args);

/// Dispatches argv[1] to a subcommand; prints usage for none or an unknown one.
int dispatch(int argc, char** argv);

}  // namespace htm
