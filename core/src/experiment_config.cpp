// Experiment files: parsing with positions, extends, variants, grid, --set, validation.
#include "experiment_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>

#include "htm/error.h"

namespace htm {
namespace {

namespace fs = std::filesystem;

// Where something was written: a file position, or a label ("--set train.lr=abc") when line is 0.
struct Where {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;

  std::string str() const {
    return line == 0 ? file : file + ":" + std::to_string(line) + ":" + std::to_string(column);
  }
};

[[noreturn]] void fail(const Where& at, const std::string& message) { throw Error(at.str() + ": " + message); }

Where where(const toml::source_region& source) {
  return {source.path ? *source.path : std::string(), source.begin.line, source.begin.column};
}

// A TOML table or leaf that remembers where its key and value were written.
struct Node {
  struct Entry;
  Where key_at;
  Where value_at;
  bool table = false;
  std::vector<Entry> children;  // a table's entries, in the order they were written
  std::optional<Value> value;   // a leaf that fits a Value (an empty list is an empty int list)
  std::string what;             // its type as messages say it: "a float", "a table", "a date"

  const Node* find(const std::string& key) const;
  Node* find(const std::string& key) { return const_cast<Node*>(std::as_const(*this).find(key)); }
  void erase(const std::string& key);
};

struct Node::Entry {
  std::string key;
  Node node;
};

const Node* Node::find(const std::string& key) const {
  for (const Entry& entry : children) {
    if (entry.key == key) return &entry.node;
  }
  return nullptr;
}

void Node::erase(const std::string& key) {
  children.erase(std::remove_if(children.begin(), children.end(), [&](const Entry& e) { return e.key == key; }),
                 children.end());
}

std::string join(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string with_article(const std::string& noun) {
  return (std::string("aeiou").find(noun[0]) != std::string::npos ? "an " : "a ") + noun;
}

bool is_list(ValueType type) {
  return type == ValueType::integer_list || type == ValueType::float_list || type == ValueType::string_list;
}

template <typename T>
struct IsList : std::false_type {};
template <typename T>
struct IsList<std::vector<T>> : std::true_type {};

// The items of a list value, each as a Value of its own; nothing for a scalar.
std::vector<Value> list_items(const Value& value) {
  std::vector<Value> items;
  std::visit(
      [&](const auto& v) {
        if constexpr (IsList<std::decay_t<decltype(v)>>::value) items.assign(v.begin(), v.end());
      },
      value);
  return items;
}

bool is_empty_list(const Value& value) { return is_list(type_of(value)) && list_items(value).empty(); }

std::string describe(const Value& value) {
  if (is_empty_list(value)) return "an empty list";
  return with_article(type_name(type_of(value)));
}

// `value` as `type`: integers widen to floats, and an empty list is a list of anything.
std::optional<Value> conform(const Value& value, ValueType type) {
  if (type_of(value) == type) return value;
  if (const auto* integer = std::get_if<int64_t>(&value); integer && type == ValueType::floating) {
    return static_cast<double>(*integer);
  }
  if (const auto* integers = std::get_if<std::vector<int64_t>>(&value); integers && type == ValueType::float_list) {
    return std::vector<double>(integers->begin(), integers->end());
  }
  if (is_empty_list(value)) {
    if (type == ValueType::float_list) return std::vector<double>();
    if (type == ValueType::string_list) return std::vector<std::string>();
  }
  return std::nullopt;
}

std::optional<Value> leaf_value(const toml::node& node) {
  if (auto v = node.as_boolean()) return v->get();
  if (auto v = node.as_integer()) return v->get();
  if (auto v = node.as_floating_point()) return v->get();
  if (auto v = node.as_string()) return v->get();
  const toml::array* array = node.as_array();
  if (!array) return std::nullopt;
  if (array->empty() || array->is_homogeneous(toml::node_type::integer)) {
    std::vector<int64_t> items;
    for (const toml::node& item : *array) items.push_back(item.as_integer()->get());
    return items;
  }
  if (array->is_homogeneous(toml::node_type::string)) {
    std::vector<std::string> items;
    for (const toml::node& item : *array) items.push_back(item.as_string()->get());
    return items;
  }
  std::vector<double> items;
  for (const toml::node& item : *array) {
    if (!item.is_number()) return std::nullopt;
    items.push_back(item.value<double>().value());
  }
  return items;
}

// What a leaf that fits no Value is.
std::string describe_other(const toml::node& node) {
  if (node.is_date()) return "a date";
  if (node.is_time()) return "a time";
  if (node.is_date_time()) return "a date-time";
  if (node.is_array_of_tables()) return "an array of tables";
  return "a mixed list";
}

Node to_node(const toml::node& value, const toml::source_region& key_source) {
  Node node;
  node.key_at = where(key_source);
  node.value_at = where(value.source());
  if (const toml::table* table = value.as_table()) {
    node.table = true;
    node.what = "a table";
    for (auto&& [key, child] : *table) node.children.push_back({std::string(key.str()), to_node(child, key.source())});
    // toml++ orders a table's keys by name; variants keep the order the file wrote them in.
    std::stable_sort(node.children.begin(), node.children.end(), [](const Node::Entry& a, const Node::Entry& b) {
      return std::tie(a.node.key_at.line, a.node.key_at.column) < std::tie(b.node.key_at.line, b.node.key_at.column);
    });
    return node;
  }
  node.value = leaf_value(value);
  node.what = node.value ? describe(*node.value) : describe_other(value);
  return node;
}

Node table_at(const Where& at) {
  Node node;
  node.key_at = node.value_at = at;
  node.table = true;
  node.what = "a table";
  return node;
}

Node leaf(Value value, const Where& key_at, const Where& value_at) {
  Node node;
  node.key_at = key_at;
  node.value_at = value_at;
  node.what = describe(value);
  node.value = std::move(value);
  return node;
}

// A root table holding `leaf` at a dotted `key` ("train.lr").
Node at_path(const std::string& key, Node leaf) {
  std::vector<std::string> parts;
  std::stringstream stream(key);
  for (std::string part; std::getline(stream, part, '.');) parts.push_back(part);
  if (key.empty() || key.back() == '.' || std::count(parts.begin(), parts.end(), "")) {
    fail(leaf.key_at, "'" + key + "' is not a dotted key like 'train.lr'");
  }
  Node node = std::move(leaf);
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    Node parent = table_at(node.key_at);
    parent.children.push_back({*part, std::move(node)});
    node = std::move(parent);
  }
  return node;
}

// A plugin slot: a table naming one plugin of a kind, with that plugin's parameters.
struct Slot {
  std::string section;
  PluginKind kind;
  std::string fallback;  // the plugin used when the file names none
  PluginChoice ResolvedConfig::*choice;
};

const std::vector<Slot>& slots() {
  static const std::vector<Slot> table = {
      {"dataset", PluginKind::dataset, "fashion_mnist", &ResolvedConfig::dataset},
      {"adapter", PluginKind::adapter, "image", &ResolvedConfig::adapter},
      {"policy", PluginKind::policy, "learned", &ResolvedConfig::policy},
      {"merge", PluginKind::merge, "mlp", &ResolvedConfig::merge},
  };
  return table;
}

const Slot* find_slot(const std::string& section) {
  for (const Slot& slot : slots()) {
    if (slot.section == section) return &slot;
  }
  return nullptr;
}

std::string plugin_named(const Slot& slot, const Node& table) {
  const Node* plugin = table.find("plugin");
  if (!plugin) return slot.fallback;
  const auto* name = plugin->value ? std::get_if<std::string>(&*plugin->value) : nullptr;
  return name ? *name : std::string();
}

// Deep merge: tables merge key by key, anything else replaces. At the top, a slot table that
// names another plugin replaces the old one whole: the old plugin's parameters mean nothing now.
void merge(Node& base, const Node& over, bool top = true) {
  for (const Node::Entry& entry : over.children) {
    Node* mine = base.find(entry.key);
    const Slot* slot = top ? find_slot(entry.key) : nullptr;
    if (!mine) {
      base.children.push_back(entry);
    } else if (mine->table && entry.node.table &&
               !(slot && entry.node.find("plugin") && plugin_named(*slot, *mine) != plugin_named(*slot, entry.node))) {
      merge(*mine, entry.node, false);
    } else {
      *mine = entry.node;
    }
  }
}

void expect_table(const Node& node, const std::string& key) {
  if (!node.table) fail(node.value_at, "'" + key + "' expects a table, got " + node.what);
}

// Top-level keys of a resolved config, and of a file (which may also hold extends, grid, variants).
std::vector<std::string> section_names(bool in_file) {
  std::vector<std::string> names = {"loss"};
  for (const auto& section : host_schema()) names.push_back(section.first);
  for (const Slot& slot : slots()) names.push_back(slot.section);
  if (in_file) names.insert(names.end(), {"extends", "grid", "variants"});
  std::sort(names.begin(), names.end());
  return names;
}

void check_sections(const Node& root, bool in_file) {
  const std::vector<std::string> names = section_names(in_file);
  for (const Node::Entry& entry : root.children) {
    if (std::find(names.begin(), names.end(), entry.key) == names.end()) {
      fail(entry.node.key_at, "unknown key '" + entry.key + "'; expected one of: " + join(names));
    }
  }
}

// The files an `extends` value names, as written.
std::vector<std::string> extends_names(const Node& extends) {
  if (extends.value) {
    if (const auto* name = std::get_if<std::string>(&*extends.value)) return {*name};
    if (auto names = conform(*extends.value, ValueType::string_list)) {
      return std::get<std::vector<std::string>>(*names);
    }
  }
  fail(extends.value_at, "'extends' expects a string or a string list, got " + extends.what);
}

// Files being read, outermost first, each as (canonical path, path as shown); for cycles.
using Chain = std::vector<std::pair<std::string, std::string>>;

std::string canonical(const std::string& path) {
  std::error_code ignored;
  return fs::weakly_canonical(path, ignored).string();
}

// One file merged over everything it extends, bases in the order named, paths relative to it.
Node read_file(const std::string& path, Chain& chain) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  toml::table table;
  try {
    table = toml::parse(text.str(), std::string_view(path));
  } catch (const toml::parse_error& error) {
    fail(where(error.source()), std::string(error.description()));
  }
  Node file = to_node(table, {});
  file.key_at = file.value_at = {path, 1, 1};
  Node merged = table_at(file.key_at);
  if (const Node* extends = file.find("extends")) {
    for (const std::string& name : extends_names(*extends)) {
      const std::string base = (fs::path(path).parent_path() / name).lexically_normal().string();
      const std::string id = canonical(base);
      auto seen = std::find_if(chain.begin(), chain.end(), [&](const auto& link) { return link.first == id; });
      if (seen != chain.end()) {
        std::vector<std::string> cycle;
        for (auto link = seen; link != chain.end(); ++link) cycle.push_back(link->second);
        cycle.push_back(base);
        fail(extends->value_at, "extends cycle: " + join(cycle, " -> "));
      }
      if (!fs::is_regular_file(base)) fail(extends->value_at, "cannot open extended file '" + name + "'");
      chain.emplace_back(id, base);
      merge(merged, read_file(base, chain));
      chain.pop_back();
    }
    file.erase("extends");
  }
  merge(merged, file);
  return merged;
}

// "train.epochs=2" as a tree; the value is TOML, or else the text itself as a string.
Node parse_override(const std::string& text) {
  const Where at{"--set " + text};
  const size_t equals = text.find('=');
  if (equals == std::string::npos) fail(at, "expected KEY=VALUE, like train.epochs=2");
  auto trim = [](const std::string& s) {
    size_t begin = s.find_first_not_of(" \t"), end = s.find_last_not_of(" \t");
    return begin == std::string::npos ? std::string() : s.substr(begin, end - begin + 1);
  };
  const std::string key = trim(text.substr(0, equals)), raw = trim(text.substr(equals + 1));
  Node value = leaf(raw, at, at);
  try {
    toml::table parsed = toml::parse("v = " + raw);
    if (parsed.size() == 1 && parsed.contains("v")) value = to_node(*parsed.get("v"), {});
  } catch (const toml::parse_error&) {
    // Not TOML: a bare word, taken as the string it spells.
  }
  std::vector<Node*> pending = {&value};
  while (!pending.empty()) {  // an inline table's positions are inside "v = ...", not in any file
    Node* node = pending.back();
    pending.pop_back();
    node->key_at = node->value_at = at;
    for (Node::Entry& entry : node->children) pending.push_back(&entry.node);
  }
  return at_path(key, std::move(value));
}

struct Variant {
  std::string name;
  Node overlay;  // partial config merged over the base
};

// One variant per combination of the grid's values; the first key varies slowest.
std::vector<Variant> grid_variants(const Node& grid) {
  expect_table(grid, "grid");
  std::vector<Variant> combos = {{"", table_at(grid.key_at)}};
  for (const Node::Entry& axis : grid.children) {
    const Node& values = axis.node;
    if (!values.value || !is_list(type_of(*values.value)) || is_empty_list(*values.value)) {
      fail(values.value_at, "'grid." + axis.key + "' expects a non-empty list of values, got " + values.what);
    }
    std::vector<Variant> next;
    for (const Variant& combo : combos) {
      for (const Value& item : list_items(*values.value)) {
        const auto* text = std::get_if<std::string>(&item);
        Variant variant = combo;
        variant.name += (combo.name.empty() ? "" : ",") + axis.key + "=" + (text ? *text : to_toml(item));
        merge(variant.overlay, at_path(axis.key, leaf(item, values.key_at, values.value_at)));
        next.push_back(std::move(variant));
      }
    }
    combos = std::move(next);
  }
  return combos;
}

// The file's named variants in declaration order, crossed with its grid; "default" if neither.
std::vector<Variant> variant_list(const Node& root) {
  std::vector<Variant> named;
  if (const Node* variants = root.find("variants")) {
    expect_table(*variants, "variants");
    for (const Node::Entry& entry : variants->children) {
      expect_table(entry.node, "variants." + entry.key);
      named.push_back({entry.key, entry.node});
    }
  }
  const Node* grid = root.find("grid");
  if (!grid) return named.empty() ? std::vector<Variant>{{"default", table_at(root.key_at)}} : named;
  std::vector<Variant> combos = grid_variants(*grid);
  if (named.empty()) return combos;
  std::vector<Variant> crossed;
  for (const Variant& variant : named) {
    for (const Variant& combo : combos) {
      crossed.push_back({variant.name + "/" + combo.name, variant.overlay});
      merge(crossed.back().overlay, combo.overlay);
    }
  }
  return crossed;
}

// Host keys whose value must be one of a few words.
const std::map<std::string, std::vector<std::string>>& choices() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"estimator.method", {"score_function", "prob_scale"}},
      {"estimator.reward", {"batch", "sample"}},
      {"estimator.baseline", {"none", "ema"}},
      {"model.task", {"reconstruct", "classify"}},
      {"model.architecture", {"htm", "vit"}},
      {"train.lr_schedule", {"step", "cosine"}},
      {"train.rho_schedule", {"epoch", "step"}},
  };
  return table;
}

// `node` as a value of `spec`'s type, or an error naming `key` and what it expects.
Value checked(const Node& node, const ParamSpec& spec, const std::string& key) {
  std::optional<Value> value = node.value ? conform(*node.value, spec.type) : std::nullopt;
  if (!value) fail(node.value_at, "'" + key + "' expects " + with_article(type_name(spec.type)) + ", got " + node.what);
  auto allowed = choices().find(key);
  if (allowed != choices().end()) {
    const std::string& word = std::get<std::string>(*value);
    const std::vector<std::string>& words = allowed->second;
    if (std::find(words.begin(), words.end(), word) == words.end()) {
      fail(node.value_at, "'" + key + "' expects one of: " + join(words) + "; got '" + word + "'");
    }
  }
  return *value;
}

const ParamSpec* find_spec(const std::vector<ParamSpec>& specs, const std::string& name) {
  for (const ParamSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::vector<std::string> sorted_names(const std::vector<ParamSpec>& specs) {
  std::vector<std::string> names;
  for (const ParamSpec& spec : specs) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  return names;
}

// A host section flattened into `values`, defaults first.
void resolve_section(const std::string& section, const std::vector<ParamSpec>& specs, const Node* table,
                     std::map<std::string, Value>& values) {
  for (const ParamSpec& spec : specs) values[section + "." + spec.name] = spec.default_value;
  if (!table) return;
  expect_table(*table, section);
  for (const Node::Entry& entry : table->children) {
    const std::string key = section + "." + entry.key;
    const ParamSpec* spec = find_spec(specs, entry.key);
    if (!spec) fail(entry.node.key_at, "unknown key '" + key + "'; expected one of: " + join(sorted_names(specs)));
    values[key] = checked(entry.node, *spec, key);
  }
}

const Manifest& find_manifest(const PluginCatalog& catalog, PluginKind kind, const std::string& name, const Where& at) {
  if (const Manifest* manifest = catalog.find(kind, name)) return *manifest;
  const std::vector<std::string> known = catalog.names(kind);
  fail(at, std::string("unknown ") + kind_name(kind) + " plugin '" + name +
               "'; known: " + (known.empty() ? "none" : join(known)));
}

// A plugin's parameters from `table` (may be null): `specs` holds the host's own (a loss's weight),
// the manifest's follow.
Params plugin_params(const Manifest& manifest, std::vector<ParamSpec> specs, const Node* table,
                     const std::string& prefix) {
  specs.insert(specs.end(), manifest.params.begin(), manifest.params.end());
  Params params;
  for (const ParamSpec& spec : specs) {
    params.set(spec.name, conform(spec.default_value, spec.type).value_or(spec.default_value));
  }
  if (!table) return params;
  for (const Node::Entry& entry : table->children) {
    const ParamSpec* spec = find_spec(specs, entry.key);
    if (!spec) {
      const std::vector<std::string> names = sorted_names(specs);
      fail(entry.node.key_at, std::string(kind_name(manifest.kind)) + " plugin '" + manifest.name +
                                  "' has no parameter '" + entry.key +
                                  "'; it has: " + (names.empty() ? "none" : join(names)));
    }
    params.set(entry.key, checked(entry.node, *spec, prefix + "." + entry.key));
  }
  return params;
}

PluginChoice resolve_slot(const Slot& slot, const Node* table, const Where& start, const PluginCatalog& catalog) {
  PluginChoice choice{slot.fallback, {}};
  Where named_at = start;
  Node params = table_at(start);
  if (table) {
    expect_table(*table, slot.section);
    named_at = table->key_at;
    params = *table;
    if (const Node* plugin = table->find("plugin")) {
      const ParamSpec spec{"plugin", ValueType::string, std::string(), ""};
      choice.name = std::get<std::string>(checked(*plugin, spec, slot.section + ".plugin"));
      named_at = plugin->value_at;
      params.erase("plugin");
    }
  }
  const Manifest& manifest = find_manifest(catalog, slot.kind, choice.name, named_at);
  choice.params = plugin_params(manifest, {}, &params, slot.section);
  return choice;
}

std::map<std::string, PluginChoice> resolve_losses(const Node* table, const Where& start,
                                                   const PluginCatalog& catalog) {
  const ParamSpec weight{"weight", ValueType::floating, 1.0, "multiplies this loss in the total"};
  std::map<std::string, PluginChoice> losses;
  if (table) {
    expect_table(*table, "loss");
    for (const Node::Entry& entry : table->children) {
      const std::string key = "loss." + entry.key;
      expect_table(entry.node, key);
      const Manifest& manifest = find_manifest(catalog, PluginKind::loss, entry.key, entry.node.key_at);
      losses[entry.key] = {entry.key, plugin_params(manifest, {weight}, &entry.node, key)};
    }
  }
  if (losses.empty()) {
    const Manifest& manifest = find_manifest(catalog, PluginKind::loss, "mse", start);
    losses["mse"] = {"mse", plugin_params(manifest, {weight}, nullptr, "loss.mse")};
  }
  return losses;
}

std::string toml_key(const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  return bare ? key : to_toml(key);
}

void write_table(std::string& out, const std::string& header, const std::map<std::string, Value>& values,
                 const std::string& plugin = "") {
  out += (out.empty() ? "[" : "\n[") + header + "]\n";
  if (!plugin.empty()) out += "plugin = " + to_toml(plugin) + "\n";
  for (const auto& [key, value] : values) out += toml_key(key) + " = " + to_toml(value) + "\n";
}

std::string to_document(const ResolvedConfig& config) {
  std::string out;
  for (const auto& [section, specs] : host_schema()) {
    std::map<std::string, Value> values;
    for (const ParamSpec& spec : specs) values[spec.name] = config.values.at(section + "." + spec.name);
    write_table(out, section, values);
  }
  for (const Slot& slot : slots()) {
    const PluginChoice& choice = config.*slot.choice;
    write_table(out, slot.section, choice.params.values(), choice.name);
  }
  for (const auto& [name, loss] : config.losses) write_table(out, "loss." + toml_key(name), loss.params.values());
  return out;
}

std::string fnv1a_hex(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

const Value& setting(const std::map<std::string, Value>& values, const std::string& key) {
  auto found = values.find(key);
  if (found == values.end()) throw Error("the config has no setting '" + key + "'");
  return found->second;
}

template <typename T>
const T& typed_setting(const std::map<std::string, Value>& values, const std::string& key, ValueType type) {
  const Value& value = setting(values, key);
  if (const T* typed = std::get_if<T>(&value)) return *typed;
  throw Error("setting '" + key + "' is " + describe(value) + ", not " + with_article(type_name(type)));
}

}  // namespace

const std::vector<std::pair<std::string, std::vector<ParamSpec>>>& host_schema() {
  using T = ValueType;
  using Ints = std::vector<int64_t>;
  static const std::vector<std::pair<std::string, std::vector<ParamSpec>>> schema = {
      {"experiment",
       {
           {"name", T::string, std::string(), "name results are filed under; empty: the file's name without .toml"},
           {"description", T::string, std::string(), "one line saying what the experiment asks"},
           {"seeds", T::integer_list, Ints{0}, "every variant runs once per seed"},
       }},
      {"model",
       {
           {"dim", T::integer, int64_t{256}, "token width C"},
           {"heads", T::integer, int64_t{8}, "attention heads h"},
           {"dropout", T::floating, 0.1, "dropout rate"},
           {"mlp_ratio", T::integer, int64_t{4}, "MLP hidden width as a multiple of dim"},
           {"schedule", T::integer_list, Ints{}, "pairs merged at each layer; empty: derived from merge_fraction"},
           {"merge_fraction", T::floating, 1.0, "fraction of tokens merged per layer: r_l = floor(f * T_l / 2)"},
           {"layers", T::integer, int64_t{8}, "merging layers L, in the encoder and in the decoder"},
           {"transformer", T::boolean, true, "transformer blocks around merging and unmerging (§4.4)"},
           {"cross_attention", T::boolean, true, "cross-attention from merged tokens to the unmerged ones (§4.4)"},
           {"task", T::string, std::string("reconstruct"),
            "reconstruct (autoencoder), or classify (encoder only, root token into a linear head, §4.1)"},
           {"architecture", T::string, std::string("htm"),
            "htm, or vit: the §4.1 baseline (lifted tokens through `layers` untied transformer blocks)"},
           {"leaf_classifier", T::boolean, false,
            "train the slides' leaf/internal token classifier (two logits per token), used by `htm sample`"},
           {"timestep_scale", T::floating, 1.0,
            "multiplies the depth signal added to every token entering a layer (eq. 7; 1: the paper)"},
           {"vit_dim", T::integer, int64_t{0},
            "width of the vit; 0: the width whose parameter count is closest to the htm classifier's"},
       }},
      {"train",
       {
           {"epochs", T::integer, int64_t{1}, "passes over the training set"},
           {"batch_size", T::integer, int64_t{256}, "samples per step"},
           {"lr", T::floating, 1e-4, "AdamW learning rate"},
           {"weight_decay", T::floating, 0.01, "AdamW weight decay"},
           {"warmup_steps", T::integer, int64_t{0}, "steps over which the learning rate rises linearly from 0"},
           {"lr_schedule", T::string, std::string("step"),
            "step (the paper: multiplied down at lr_decay_epochs) or cosine (to 0 at the last step)"},
           {"lr_decay_epochs", T::integer_list, Ints{}, "epochs at which the learning rate is multiplied down"},
           {"lr_decay_factor", T::floating, 0.1, "what the learning rate is multiplied by at each decay epoch"},
           {"rho0", T::floating, 0.05, "initial rho of the stochastic schedule, P(depth d) ~ rho^d (§3.1.4)"},
           {"rho_step", T::floating, 0.01, "added to rho after each epoch, up to 1"},
           {"rho_schedule", T::string, std::string("epoch"),
            "epoch (the paper: rho0 + rho_step per epoch) or step (rho0 rising linearly to rho_end over "
            "the first rho_ramp of the steps)"},
           {"rho_end", T::floating, 1.0, "rho reached by a step-wise ramp; above 1 favours the full depth"},
           {"rho_ramp", T::floating, 0.5, "fraction of the steps over which a step-wise ramp rises"},
           {"stochastic_depth", T::boolean, true,
            "draw each step's depth from the rho schedule (§3.1.4); false: always the full schedule"},
           {"max_steps", T::integer, int64_t{0}, "stop after this many steps; 0: no cap"},
           {"train_samples", T::integer, int64_t{0}, "training samples used; 0: all"},
           {"eval_samples", T::integer, int64_t{0}, "evaluation samples used; 0: all"},
           {"eval_every", T::integer, int64_t{0}, "also evaluate every N steps; 0: only at each epoch's end"},
           {"log_every", T::integer, int64_t{10}, "record training metrics every N steps"},
           {"eval_batch_size", T::integer, int64_t{256}, "samples per evaluation batch"},
           {"grad_clip", T::floating, 0.0, "clip the gradient norm to this; 0: off"},
           {"images", T::integer, int64_t{8}, "samples shown in the reconstruction picture"},
           {"checkpoint", T::boolean, true, "save a checkpoint with the run"},
       }},
      {"estimator",
       {
           {"method", T::string, std::string("score_function"),
            "gradient through the merges: score_function (eq. 2-4) or prob_scale (A.4)"},
           {"reward", T::string, std::string("batch"), "score-function reward: the batch's loss, or each sample's"},
           {"baseline", T::string, std::string("none"), "subtracted from the reward: none, or ema (moving average)"},
           {"baseline_decay", T::floating, 0.9, "decay of the ema baseline"},
       }},
      {"runtime",
       {
           {"threads", T::integer, int64_t{0}, "torch threads; 0: all cores"},
           {"results", T::string, std::string("results/htm.sqlite"), "the results database"},
           {"artifacts", T::string, std::string("results/runs"), "folder of per-run checkpoints and images"},
       }},
  };
  return schema;
}

int64_t ResolvedConfig::integer(const std::string& key) const {
  return typed_setting<int64_t>(values, key, ValueType::integer);
}

double ResolvedConfig::number(const std::string& key) const {
  if (const auto* integer = std::get_if<int64_t>(&setting(values, key))) return static_cast<double>(*integer);
  return typed_setting<double>(values, key, ValueType::floating);
}

bool ResolvedConfig::flag(const std::string& key) const { return typed_setting<bool>(values, key, ValueType::boolean); }

const std::string& ResolvedConfig::text(const std::string& key) const {
  return typed_setting<std::string>(values, key, ValueType::string);
}

std::vector<int64_t> ResolvedConfig::integers(const std::string& key) const {
  return typed_setting<std::vector<int64_t>>(values, key, ValueType::integer_list);
}

std::vector<double> ResolvedConfig::numbers(const std::string& key) const {
  if (const auto* integers = std::get_if<std::vector<int64_t>>(&setting(values, key))) {
    return std::vector<double>(integers->begin(), integers->end());
  }
  return typed_setting<std::vector<double>>(values, key, ValueType::float_list);
}

std::map<std::string, Value> ResolvedConfig::flattened() const {
  std::map<std::string, Value> flat = values;
  for (const Slot& slot : slots()) {
    const PluginChoice& choice = this->*slot.choice;
    flat[slot.section + ".plugin"] = choice.name;
    for (const auto& [name, value] : choice.params.values()) flat[slot.section + "." + name] = value;
  }
  for (const auto& [loss, choice] : losses) {
    for (const auto& [name, value] : choice.params.values()) flat["loss." + loss + "." + name] = value;
  }
  return flat;
}

struct ExperimentFile::Parsed {
  Node root;
  std::vector<Node> overrides;  // one tree per --set, applied in order
};

ExperimentFile ExperimentFile::load(const std::string& path, const std::vector<std::string>& overrides) {
  if (!fs::is_regular_file(path)) throw Error("cannot open experiment file '" + path + "'");
  ExperimentFile file;
  file.path_ = path;
  file.parsed_ = std::make_unique<Parsed>();
  Chain chain = {{canonical(path), path}};
  file.parsed_->root = read_file(path, chain);
  check_sections(file.parsed_->root, true);
  variant_list(file.parsed_->root);  // reports a malformed variant or grid now rather than at resolve
  for (const std::string& text : overrides) file.parsed_->overrides.push_back(parse_override(text));
  return file;
}

ExperimentFile::~ExperimentFile() = default;
ExperimentFile::ExperimentFile(ExperimentFile&&) noexcept = default;
ExperimentFile& ExperimentFile::operator=(ExperimentFile&&) noexcept = default;

std::vector<std::string> ExperimentFile::variants() const {
  std::vector<std::string> names;
  for (const Variant& variant : variant_list(parsed_->root)) names.push_back(variant.name);
  return names;
}

ResolvedConfig ExperimentFile::resolve(const std::string& variant, const PluginCatalog& catalog) const {
  const std::vector<Variant> variants = variant_list(parsed_->root);
  auto chosen = std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == variant; });
  if (chosen == variants.end())
    throw Error(path_ + " has no variant '" + variant + "'; it has: " + join(this->variants()));

  Node config = parsed_->root;
  config.erase("variants");
  config.erase("grid");
  merge(config, chosen->overlay);
  for (const Node& override : parsed_->overrides) merge(config, override);
  check_sections(config, false);

  ResolvedConfig resolved;
  resolved.variant = variant;
  for (const auto& [section, specs] : host_schema()) {
    resolve_section(section, specs, config.find(section), resolved.values);
  }
  const Where start{path_, 1, 1};
  for (const Slot& slot : slots())
    resolved.*slot.choice = resolve_slot(slot, config.find(slot.section), start, catalog);
  resolved.losses = resolve_losses(config.find("loss"), start, catalog);

  auto& name = std::get<std::string>(resolved.values["experiment.name"]);
  if (name.empty()) name = fs::path(path_).stem().string();
  resolved.experiment = name;
  resolved.toml = to_document(resolved);
  resolved.hash = fnv1a_hex(resolved.toml);
  return resolved;
}

}  // namespace htm
