// The TOML tree with positions: parsing, dotted paths, --set overrides, deep merge.
#include "config/toml_tree.h"

#include <toml++/toml.h>

#include <algorithm>
#include <sstream>
#include <tuple>
#include <utility>

#include "htm/error.h"

namespace htm::config {

std::string Where::str() const {
  return line == 0 ? file : file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

void fail(const Where& at, const std::string& message) { throw Error(at.str() + ": " + message); }

namespace {

template <typename T>
struct IsList : std::false_type {};
template <typename T>
struct IsList<std::vector<T>> : std::true_type {};

Where where(const toml::source_region& source) {
  return {source.path ? *source.path : std::string(), source.begin.line, source.begin.column};
}

}  // namespace

const Node* Node::find(const std::string& key) const {
  for (const Entry& entry : children) {
    if (entry.key == key) return &entry.node;
  }
  return nullptr;
}

Node* Node::find(const std::string& key) { return const_cast<Node*>(std::as_const(*this).find(key)); }

void Node::erase(const std::string& key) {
  children.erase(std::remove_if(children.begin(), children.end(), [&](const Entry& e) { return e.key == key; }),
                 children.end());
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
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

namespace {

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

}  // namespace

Node parse_toml(const std::string& text, const std::string& path) {
  toml::table table;
  try {
    table = toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& error) {
    fail(where(error.source()), std::string(error.description()));
  }
  Node root = to_node(table, {});
  root.key_at = root.value_at = {path, 1, 1};
  return root;
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

void expect_table(const Node& node, const std::string& key) {
  if (!node.table) fail(node.value_at, "'" + key + "' expects a table, got " + node.what);
}

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

Node parse_sweep(const std::string& text) {
  const Where at{"--sweep " + text};
  const size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0) fail(at, "expected KEY=A,B,..., like train.lr=1e-3,3e-3");
  const std::string key = text.substr(0, equals), raw = text.substr(equals + 1);
  Node values;
  try {
    toml::table parsed = toml::parse("v = [" + raw + "]");
    values = to_node(*parsed.get("v"), {});
  } catch (const toml::parse_error&) {  // bare words: the strings they spell
    std::vector<std::string> words;
    std::stringstream stream(raw);
    for (std::string word; std::getline(stream, word, ',');) words.push_back(word);
    values = leaf(Value(words), at, at);
  }
  values.key_at = values.value_at = at;
  if (!values.value || !is_list(type_of(*values.value)) || is_empty_list(*values.value))
    fail(at, "expects one or more values of one type after '=', got " + values.what);
  Node grid = table_at(at);
  grid.children.push_back({key, std::move(values)});
  Node root = table_at(at);
  root.children.push_back({"grid", std::move(grid)});
  return root;
}

void merge(Node& base, const Node& over, const ReplacesWhole& replaces_whole) {
  for (const Node::Entry& entry : over.children) {
    Node* mine = base.find(entry.key);
    if (!mine) {
      base.children.push_back(entry);
    } else if (mine->table && entry.node.table && !(replaces_whole && replaces_whole(entry.key, *mine, entry.node))) {
      merge(*mine, entry.node);
    } else {
      *mine = entry.node;
    }
  }
}

}  // namespace htm::config
