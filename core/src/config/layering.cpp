#include "config/layering.h"

#include <algorithm>

namespace htm::config {
namespace {

const Slot* find_slot(const std::string& section) {
  for (const Slot& slot : slots())
    if (slot.section == section) return &slot;
  return nullptr;
}

std::string plugin_named(const Slot& slot, const Node& table) {
  const Node* plugin = table.find("plugin");
  if (!plugin) return slot.fallback;
  const auto* name = plugin->value ? std::get_if<std::string>(&*plugin->value) : nullptr;
  return name ? *name : std::string();
}

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
        merge_layer(variant.overlay, at_path(axis.key, leaf(item, values.key_at, values.value_at)));
        next.push_back(std::move(variant));
      }
    }
    combos = std::move(next);
  }
  return combos;
}

}  // namespace

const std::vector<Slot>& slots() {
  static const std::vector<Slot> table = {
      {"dataset", PluginKind::dataset, "fashion_mnist", &ResolvedConfig::dataset},
      {"adapter", PluginKind::adapter, "image", &ResolvedConfig::adapter},
      {"policy", PluginKind::policy, "learned", &ResolvedConfig::policy},
      {"merge", PluginKind::merge, "mlp", &ResolvedConfig::merge},
  };
  return table;
}

void merge_layer(Node& base, const Node& over) {
  merge(base, over, [](const std::string& key, const Node& mine, const Node& theirs) {
    const Slot* slot = find_slot(key);
    return slot && theirs.find("plugin") && plugin_named(*slot, mine) != plugin_named(*slot, theirs);
  });
}

std::vector<std::string> section_names(bool in_file) {
  std::vector<std::string> names = {"loss"};
  for (const HostSection& section : host_schema()) names.push_back(section.name);
  for (const Slot& slot : slots()) names.push_back(slot.section);
  if (in_file) names.insert(names.end(), {"extends", "grid", "variants"});
  std::sort(names.begin(), names.end());
  return names;
}

void check_sections(const Node& root, bool in_file) {
  const std::vector<std::string> names = section_names(in_file);
  for (const Node::Entry& entry : root.children)
    if (std::find(names.begin(), names.end(), entry.key) == names.end())
      fail(entry.node.key_at, "unknown key '" + entry.key + "'; expected one of: " + join(names));
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
      merge_layer(crossed.back().overlay, combo.overlay);
    }
  }
  return crossed;
}

}  // namespace htm::config
