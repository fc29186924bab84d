// A TOML document as a tree that keeps where each key and value was written: toml++ drops
// positions when it copies a node, and every config error must name its file:line:column.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "htm/value.h"

namespace htm::config {

/// Where something was written: a file position, or a label ("--set train.lr=abc") when line is 0.
struct Where {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;

  std::string str() const;
};

/// Throws htm::Error "FILE:LINE:COL: message".
[[noreturn]] void fail(const Where& at, const std::string& message);

/// A table or leaf that remembers where its key and value were written.
struct Node {
  struct Entry;
  Where key_at;
  Where value_at;
  bool table = false;
  std::vector<Entry> children;  ///< a table's entries, in the order they were written
  std::optional<Value> value;   ///< a leaf that fits a Value (an empty list is an empty int list)
  std::string what;             ///< its type as messages say it: "a float", "a table", "a date"

  const Node* find(const std::string& key) const;
  Node* find(const std::string& key);
  void erase(const std::string& key);
};

struct Node::Entry {
  std::string key;
  Node node;
};

/// Parses TOML `text`; positions name `path`. Throws "PATH:LINE:COL: message" when malformed.
Node parse_toml(const std::string& text, const std::string& path);
/// An empty table written at `at`.
Node table_at(const Where& at);
/// A leaf holding `value`.
Node leaf(Value value, const Where& key_at, const Where& value_at);
/// A root table holding `leaf` at a dotted `key` ("train.lr").
Node at_path(const std::string& key, Node leaf);
/// "train.epochs=2" as a tree; the value is TOML, or else the text itself as a string.
Node parse_override(const std::string& text);
/// "train.lr=1e-3,3e-3" as a tree holding [grid] "train.lr" = [1e-3, 3e-3]; values are TOML,
/// or else comma-separated bare words taken as strings.
Node parse_sweep(const std::string& text);
/// Throws unless `node` is a table: "'KEY' expects a table, got ...".
void expect_table(const Node& node, const std::string& key);

/// Deep merge: tables merge key by key, anything else replaces. For each pair of top-level
/// tables, `replaces_whole(key, base, over)` may say that `over` replaces `base` whole.
using ReplacesWhole = std::function<bool(const std::string& key, const Node& base, const Node& over)>;
void merge(Node& base, const Node& over, const ReplacesWhole& replaces_whole = {});

// ---- values in messages
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");
std::string with_article(const std::string& noun);
/// "an empty list", "a float", ...
std::string describe(const Value& value);
bool is_list(ValueType type);
/// The items of a list value, each as a Value of its own; nothing for a scalar.
std::vector<Value> list_items(const Value& value);
bool is_empty_list(const Value& value);
/// `value` as `type`: integers widen to floats, and an empty list is a list of anything.
std::optional<Value> conform(const Value& value, ValueType type);

}  // namespace htm::config
