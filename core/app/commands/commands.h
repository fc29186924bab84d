// What the `htm` subcommands share: option parsing, --tag's key=value, an error's one line, and
// the dispatcher. Each command registers itself (commands/command_registry.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "commands/command_registry.h"

namespace htm {

/// "key=value" of option `option` (--tag) split at its first '='; throws htm::Error
/// "--tag TEXT: expected key=value" when there is none or the key is empty.
std::pair<std::string, std::string> key_value(const std::string& option, const std::string& text);

/// Parses `args` against `options` (+ `positional`), adding --help; returns false after
/// printing "usage: htm COMMAND SYNOPSIS" and the options when help was asked for.
bool parse_options(const std::string& command, const Args& args, boost::program_options::options_description& options,
                   const boost::program_options::positional_options_description& positional,
                   boost::program_options::variables_map& vm, const char* synopsis);

/// An error's text as the terminal shows it: one line, libtorch's C++ frames moved to a log
/// file under the temporary folder that the line names.
std::string without_frames(const std::string& text);

/// Dispatches argv[1] to a subcommand; prints usage for none or an unknown one.
int dispatch(int argc, char** argv);

}  // namespace htm
