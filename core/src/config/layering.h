// How the layers of an experiment file combine: the plugin slots ([dataset], [adapter],
// [policy], [merge]), a merge that knows them, variants crossed with the grid, and the parsed
// file. Internal to config/.
#pragma once

#include <string>
#include <vector>

#include "config/experiment_config.h"
#include "config/toml_tree.h"

namespace htm::config {

/// A table naming one plugin of a kind, with that plugin's parameters.
struct Slot {
  std::string section;
  PluginKind kind;
  std::string fallback;  ///< the plugin used when the file names none
  PluginChoice ResolvedConfig::*choice;
};

const std::vector<Slot>& slots();

/// Deep merge of config layers. A slot table that names another plugin replaces the old one
/// whole: the old plugin's parameters mean nothing to the new one.
void merge_layer(Node& base, const Node& over);

/// Top-level keys of a resolved config, and of a file (which may also hold extends, grid, variants).
std::vector<std::string> section_names(bool in_file);
/// Throws at the first top-level key that is not a section.
void check_sections(const Node& root, bool in_file);

/// A named partial config merged over the base.
struct Variant {
  std::string name;
  Node overlay;
};

/// The file's named variants in declaration order, crossed with its grid; "default" if neither.
std::vector<Variant> variant_list(const Node& root);

}  // namespace htm::config

namespace htm {

struct ExperimentFile::Parsed {
  config::Node root;                    ///< the file merged over what it extends
  std::vector<config::Node> overrides;  ///< one tree per --set, applied in order
};

}  // namespace htm
