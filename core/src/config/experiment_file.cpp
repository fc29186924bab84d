// Reading experiment files: `extends` chains (relative to the including file, then htm's own
// experiments), `--set` overrides, and the variant list.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/experiment_config.h"
#include "config/layering.h"
#include "config/search_path.h"
#include "htm/error.h"

namespace htm {
namespace {

namespace fs = std::filesystem;
using config::fail;
using config::Node;

std::vector<std::string> extends_names(const Node& extends) {
  if (extends.value) {
    if (const auto* name = std::get_if<std::string>(&*extends.value)) return {*name};
    if (auto names = config::conform(*extends.value, ValueType::string_list))
      return std::get<std::vector<std::string>>(*names);
  }
  fail(extends.value_at, "'extends' expects a string or a string list, got " + extends.what);
}

// Files being read, outermost first, each as (canonical path, path as shown); for cycles.
using Chain = std::vector<std::pair<std::string, std::string>>;

std::string canonical(const std::string& path) {
  std::error_code ignored;
  return fs::weakly_canonical(path, ignored).string();
}

// A relative `name` in htm's experiments folders; empty when in none.
std::string search_experiments(const std::string& name) {
  if (!fs::path(name).is_relative()) return {};
  for (const std::string& folder : experiment_search_path()) {
    const std::string candidate = (fs::path(folder) / name).lexically_normal().string();
    if (fs::is_regular_file(candidate)) return candidate;
  }
  return {};
}

// Where an `extends` name written in `including` points: beside it, else in htm's experiments.
std::string find_extended(const std::string& name, const std::string& including, const Node& at) {
  const std::string beside = (fs::path(including).parent_path() / name).lexically_normal().string();
  if (fs::is_regular_file(beside)) return beside;
  const std::string found = search_experiments(name);
  if (!found.empty()) return found;
  fail(at.value_at, "cannot open extended file '" + name + "' (looked beside " + including +
                        " and in htm's experiments: " + config::join(experiment_search_path()) + ")");
}

Node read_text(const std::string& text, const std::string& path, Chain& chain);

Node read_file(const std::string& path, Chain& chain) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return read_text(text.str(), path, chain);
}

// One document merged over everything it extends, bases in the order named.
Node read_text(const std::string& text, const std::string& path, Chain& chain) {
  Node file = config::parse_toml(text, path);
  Node merged = config::table_at(file.key_at);
  if (const Node* extends = file.find("extends")) {
    for (const std::string& name : extends_names(*extends)) {
      const std::string base = find_extended(name, path, *extends);
      const std::string id = canonical(base);
      auto seen = std::find_if(chain.begin(), chain.end(), [&](const auto& link) { return link.first == id; });
      if (seen != chain.end()) {
        std::vector<std::string> cycle;
        for (auto link = seen; link != chain.end(); ++link) cycle.push_back(link->second);
        cycle.push_back(base);
        fail(extends->value_at, "extends cycle: " + config::join(cycle, " -> "));
      }
      chain.emplace_back(id, base);
      config::merge_layer(merged, read_file(base, chain));
      chain.pop_back();
    }
    file.erase("extends");
  }
  config::merge_layer(merged, file);
  return merged;
}

}  // namespace

std::vector<std::string> experiment_search_path() {
  return search_path("HTM_EXPERIMENTS_PATH",
                     {HTM_INSTALL_EXPERIMENTS_DIR, std::string(HTM_SOURCE_DIR) + "/experiments"});
}

ExperimentFile ExperimentFile::load(const std::string& name, const std::vector<std::string>& overrides) {
  std::string path = name;
  if (!fs::is_regular_file(path)) path = search_experiments(name);
  if (path.empty()) throw Error("cannot open experiment file '" + name + "'");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path, overrides);
}

ExperimentFile ExperimentFile::parse(const std::string& text, const std::string& label,
                                     const std::vector<std::string>& overrides) {
  ExperimentFile file;
  file.path_ = label;
  file.parsed_ = std::make_unique<Parsed>();
  Chain chain = {{canonical(label), label}};
  file.parsed_->root = read_text(text, label, chain);
  if (file.parsed_->root.children.empty() && overrides.empty())
    throw Error(label +
                ": the file sets nothing (it is empty or holds only comments); an experiment file names at "
                "least its [experiment] or a plugin");
  config::check_sections(file.parsed_->root, true);
  config::variant_list(file.parsed_->root);  // reports a malformed variant or grid now rather than at resolve
  for (const std::string& item : overrides) file.parsed_->overrides.push_back(config::parse_override(item));
  return file;
}

void ExperimentFile::add_sweep(const std::string& item) {
  config::merge_layer(parsed_->root, config::parse_sweep(item));
  config::variant_list(parsed_->root);  // a bad key or value is reported now, naming the option
}

ExperimentFile::~ExperimentFile() = default;
ExperimentFile::ExperimentFile(ExperimentFile&&) noexcept = default;
ExperimentFile& ExperimentFile::operator=(ExperimentFile&&) noexcept = default;

std::vector<std::string> ExperimentFile::variants() const {
  std::vector<std::string> names;
  for (const config::Variant& variant : config::variant_list(parsed_->root)) names.push_back(variant.name);
  return names;
}

}  // namespace htm
