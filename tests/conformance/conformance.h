// What htm-conformance checks: set once by its main from the command line, before GoogleTest
// registers the parameterised suites.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace htm::conformance {

/// Plugin libraries (.so) and folders named on the command line; none: every plugin htm finds.
void set_targets(const std::vector<std::string>& targets);
/// The registry's search path: the named folders and the named libraries' folders, or htm's own.
std::vector<std::string> search_path();
/// Whether the library at `path` is under test.
bool under_test(const std::string& path);
/// Parameter values from the command line (`--param NAME=VALUE`), given to every plugin under
/// test that declares NAME: a plugin that cannot be built from its defaults (the torchscript
/// policy's `path`) is checked with them.
void set_params(const std::vector<std::pair<std::string, std::string>>& params);
const std::vector<std::pair<std::string, std::string>>& params();

}  // namespace htm::conformance
