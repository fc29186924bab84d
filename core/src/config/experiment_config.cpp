// Resolving a variant: host sections and plugin slots checked against their schemas, the
// typed settings, the stored TOML document and its hash.
#include "config/experiment_config.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "config/layering.h"
#include "htm/error.h"

namespace htm {
namespace {

using config::conform;
using config::expect_table;
using config::fail;
using config::join;
using config::Node;
using config::Where;
using config::with_article;

// `node` as a value of `spec`'s type (and one of `choices`, when given), or an error naming `key`.
Value checked(const Node& node, const ParamSpec& spec, const std::string& key,
              const std::vector<std::string>& choices = {}) {
  std::optional<Value> value = node.value ? conform(*node.value, spec.type) : std::nullopt;
  if (!value) fail(node.value_at, "'" + key + "' expects " + with_article(type_name(spec.type)) + ", got " + node.what);
  if (!choices.empty()) {
    const std::string& word = std::get<std::string>(*value);
    if (std::find(choices.begin(), choices.end(), word) == choices.end())
      fail(node.value_at, "'" + key + "' expects one of: " + join(choices) + "; got '" + word + "'");
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
void resolve_section(const HostSection& section, const Node* table, std::map<std::string, Value>& values) {
  for (const HostSetting& setting : section.settings)
    values[section.name + "." + setting.spec.name] = setting.spec.default_value;
  if (!table) return;
  expect_table(*table, section.name);
  for (const Node::Entry& entry : table->children) {
    const std::string key = section.name + "." + entry.key;
    auto setting = std::find_if(section.settings.begin(), section.settings.end(),
                                [&](const HostSetting& s) { return s.spec.name == entry.key; });
    if (setting == section.settings.end()) {
      std::vector<std::string> names;
      for (const HostSetting& s : section.settings) names.push_back(s.spec.name);
      std::sort(names.begin(), names.end());
      fail(entry.node.key_at, "unknown key '" + key + "'; expected one of: " + join(names));
    }
    values[key] = checked(entry.node, setting->spec, key, setting->choices);
    if (setting->range) {
      const std::string expected = setting->range(values[key]);
      if (!expected.empty())
        fail(entry.node.value_at, "'" + key + "' expects " + expected + ", got " + to_toml(values[key]));
    }
  }
}

// Settings that must agree with each other: attention heads split the width evenly.
void check_model_shape(const ModelSettings& model, const Node* table, const Where& start) {
  if (model.dim % model.heads == 0) return;
  const Node* heads = table ? table->find("heads") : nullptr;
  const Node* dim = table ? table->find("dim") : nullptr;
  const Node* at = heads ? heads : dim;
  fail(at ? at->value_at : start, "'model.heads' (" + std::to_string(model.heads) + ") must divide 'model.dim' (" +
                                      std::to_string(model.dim) + ")");
}

// The name becomes a folder under runtime.artifacts: one safe path component, no more.
void check_experiment_name(const std::string& name, const Node* table, const Where& start) {
  const bool safe = !name.empty() && name.size() <= 100 && name[0] != '.' && name[0] != '-' &&
                    std::all_of(name.begin(), name.end(), [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
                    });
  if (safe) return;
  const Node* at = table ? table->find("name") : nullptr;
  fail(at ? at->value_at : start, "'experiment.name' (" + to_toml(Value(name)) +
                                      ") must be one folder name: letters, digits, '-', '_' and '.', not starting "
                                      "with '.' or '-', at most 100 characters");
}

// The confirmation seeds are kept apart from the exploration seeds: a seed in both would let a
// variant be chosen on the runs that are to confirm it.
void check_seed_phases(const ExperimentSettings& experiment, const Node* table, const Where& start) {
  for (int64_t seed : experiment.confirm_seeds)
    if (std::find(experiment.seeds.begin(), experiment.seeds.end(), seed) != experiment.seeds.end()) {
      const Node* at = table ? table->find("confirm_seeds") : nullptr;
      if (at == nullptr && table != nullptr) at = table->find("seeds");
      fail(at ? at->value_at : start, "seed " + std::to_string(seed) +
                                          " is both an exploration seed ('experiment.seeds') and a confirmation "
                                          "seed ('experiment.confirm_seeds', default 1000-1009): the two sets must "
                                          "not share a seed");
    }
}

// Cross-setting rules of [estimator] (settings.h), reported where the file wrote the setting at fault.
void check_estimator(const EstimatorSettings& estimator, const Node* table, const Where& start) {
  for (const SettingProblem& problem : estimator_problems(estimator)) {
    const Node* at = nullptr;
    for (const std::string& key : problem.keys)
      if (at == nullptr && table != nullptr) at = table->find(key);
    fail(at ? at->value_at : start, problem.message);
  }
}

// runtime.recompute = "blocks" draws a block's dropout masks again from the global generator's
// state; a CUDA graph's masks come from the device's generator as it stands, which it cannot
// replay. Without dropout (model.dropout = 0) a block draws nothing, and the two combine; "mlp"
// draws nothing at all. "mlp" is the native and gpu kernels' (the portable ones are the ops apart).
void check_runtime(const RuntimeSettings& runtime, double dropout, const Node* table, const Where& start) {
  const Node* at = table ? table->find("recompute") : nullptr;
  if (runtime.recompute == RuntimeRecompute::mlp && runtime.kernels == RuntimeKernels::portable)
    fail(at ? at->value_at : start,
         "'runtime.recompute' = \"mlp\" needs the native or gpu kernels ('runtime.kernels'): the portable ones are "
         "the reference, each op apart, and keep every activation");
  if (runtime.recompute != RuntimeRecompute::blocks || runtime.cuda_graph == RuntimeCudaGraph::off || dropout == 0)
    return;
  fail(at ? at->value_at : start,
       "'runtime.recompute' = \"blocks\" cannot be combined with 'runtime.cuda_graph' = \"on\" or \"eager\": the "
       "graph's dropout masks come from the device's generator as it stands, which a recomputation cannot replay "
       "(with model.dropout = 0 there are none, and they combine)");
}

const Manifest& find_manifest(const PluginCatalog& catalog, PluginKind kind, const std::string& name, const Where& at) {
  if (const Manifest* manifest = catalog.find(kind, name)) return *manifest;
  const std::string refused = catalog.why_missing(kind, name);
  if (!refused.empty())
    fail(at, std::string(kind_name(kind)) + " plugin '" + name + "' was found but not loaded: " + refused);
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

PluginChoice resolve_slot(const config::Slot& slot, const Node* table, const Where& start,
                          const PluginCatalog& catalog) {
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
  if (const Node* run_seed = slot.kind == PluginKind::dataset ? params.find(kRunSeedParam) : nullptr)
    fail(run_seed->key_at, slot.section + "." + kRunSeedParam +
                               " is set by htm run to each run's seed (the data follow it); set the run's "
                               "seeds instead (experiment.seeds, --seed)");
  choice.params = plugin_params(manifest, {}, &params, slot.section);
  return choice;
}

std::map<std::string, LossChoice> resolve_losses(const Node* table, const Where& start, const PluginCatalog& catalog) {
  const ParamSpec weight{"weight", ValueType::floating, 1.0, "multiplies this loss in the total"};
  std::map<std::string, LossChoice> losses;
  if (table) {
    expect_table(*table, "loss");
    for (const Node::Entry& entry : table->children) {
      const std::string key = "loss." + entry.key;
      expect_table(entry.node, key);
      const Manifest& manifest = find_manifest(catalog, PluginKind::loss, entry.key, entry.node.key_at);
      losses[entry.key].params = plugin_params(manifest, {weight}, &entry.node, key);
      const Value w = losses[entry.key].params.number("weight");
      const std::string expected = real_in(0, std::numeric_limits<double>::infinity())(w);
      if (const Node* set = entry.node.find("weight"); set && !expected.empty())  // as a host setting's range
        fail(set->value_at, "'" + key + ".weight' expects " + expected + ", got " + to_toml(w));
    }
  }
  if (losses.empty()) {
    const Manifest& manifest = find_manifest(catalog, PluginKind::loss, "mse", start);
    losses["mse"].params = plugin_params(manifest, {weight}, nullptr, "loss.mse");
  }
  for (auto& [name, loss] : losses) {
    loss.name = name;
    loss.weight = loss.params.number("weight");
  }
  return losses;
}

std::string toml_key(const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  return bare ? key : to_toml(key);
}

// A plugin's parameters as a run records them: a dataset's run_seed is the run's seed, which the
// run records apart (so a variant's config and hash are the same for every seed).
std::map<std::string, Value> recorded_params(const config::Slot& slot, const PluginChoice& choice) {
  std::map<std::string, Value> values = choice.params.values();
  if (slot.kind == PluginKind::dataset) values.erase(kRunSeedParam);
  return values;
}

void write_table(std::string& out, const std::string& header, const std::map<std::string, Value>& values,
                 const std::string& plugin = "") {
  out += (out.empty() ? "[" : "\n[") + header + "]\n";
  if (!plugin.empty()) out += "plugin = " + to_toml(plugin) + "\n";
  for (const auto& [key, value] : values) out += toml_key(key) + " = " + to_toml(value) + "\n";
}

// With `identity_only`, what does not change what a run computes is left out: [experiment] (its
// name, description and seed list) and [runtime]'s threads, files and checkpoint intervals. So
// are the settings added after runs were recorded (HostSetting::later: runtime.precision, the
// estimator's dense reward and replay) while at their defaults, so those runs keep their hashes.
std::string to_document(const ResolvedConfig& config, const std::map<std::string, Value>& host_values,
                        bool identity_only = false) {
  std::string out;
  for (const HostSection& section : host_schema()) {
    // [experiment] names and describes the study; of it only confirm_seeds enters a run's
    // identity (which seeds confirm: changed between the phases, htm compare's hash warning fires),
    // and only when set, as a setting added later does (the default's hashes stay as they were).
    const bool described = identity_only && section.name == "experiment";
    std::map<std::string, Value> values;
    for (const HostSetting& setting : section.settings) {
      const Value& value = host_values.at(section.name + "." + setting.spec.name);
      if (described && setting.spec.name != "confirm_seeds") continue;
      if (identity_only &&
          (setting.later || described ? value == setting.spec.default_value : section.name == "runtime"))
        continue;
      values[setting.spec.name] = value;
    }
    if (!values.empty()) write_table(out, section.name, values);
  }
  for (const config::Slot& slot : config::slots()) {
    const PluginChoice& choice = config.*slot.choice;
    write_table(out, slot.section, recorded_params(slot, choice), choice.name);
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

}  // namespace

std::map<std::string, Value> ResolvedConfig::flattened() const {
  std::map<std::string, Value> flat = host_values_;
  for (const config::Slot& slot : config::slots()) {
    const PluginChoice& choice = this->*slot.choice;
    flat[slot.section + ".plugin"] = choice.name;
    for (const auto& [name, value] : recorded_params(slot, choice)) flat[slot.section + "." + name] = value;
  }
  for (const auto& [loss, choice] : losses) {
    for (const auto& [name, value] : choice.params.values()) flat["loss." + loss + "." + name] = value;
  }
  return flat;
}

ResolvedConfig ExperimentFile::resolve(const std::string& variant, const PluginCatalog& catalog) const {
  const std::vector<config::Variant> variants = config::variant_list(parsed_->root);
  auto chosen = std::find_if(variants.begin(), variants.end(), [&](const auto& v) { return v.name == variant; });
  if (chosen == variants.end())
    throw Error(path_ + " has no variant '" + variant + "'; it has: " + join(this->variants()));

  Node config = parsed_->root;
  config.erase("variants");
  config.erase("grid");
  config::merge_layer(config, chosen->overlay);
  for (const Node& override : parsed_->overrides) config::merge_layer(config, override);
  config::check_sections(config, false);

  ResolvedConfig resolved;
  resolved.variant = variant;
  for (const HostSection& section : host_schema())
    resolve_section(section, config.find(section.name), resolved.host_values_);
  auto& name = std::get<std::string>(resolved.host_values_["experiment.name"]);
  if (name.empty()) name = std::filesystem::path(path_).stem().string();
  check_experiment_name(name, config.find("experiment"), Where{path_, 1, 1});
  resolved.settings = typed_settings(resolved.host_values_);
  const Where start{path_, 1, 1};
  check_seed_phases(resolved.settings.experiment, config.find("experiment"), start);
  check_model_shape(resolved.settings.model, config.find("model"), start);
  check_estimator(resolved.settings.estimator, config.find("estimator"), start);
  check_runtime(resolved.settings.runtime, resolved.settings.model.dropout, config.find("runtime"), start);
  resolved.experiment = name;
  for (const config::Slot& slot : config::slots())
    resolved.*slot.choice = resolve_slot(slot, config.find(slot.section), start, catalog);
  resolved.losses = resolve_losses(config.find("loss"), start, catalog);
  const Node* train = config.find("train");
  if (resolved.settings.train.anytime > 0 &&
      (resolved.settings.model.task == Task::classify || resolved.settings.model.architecture == Architecture::vit)) {
    const Node* at = train ? train->find("anytime") : nullptr;
    fail(at ? at->value_at : start,
         "'train.anytime' reconstructs the input from the encoder's intermediate "
         "populations: it needs the htm autoencoder (model.task = \"reconstruct\", "
         "model.architecture = \"htm\")");
  }
  const Node* eval_policies = train ? train->find("eval_policies") : nullptr;
  for (const std::string& policy : resolved.settings.train.eval_policies) {
    const Manifest& manifest =
        find_manifest(catalog, PluginKind::policy, policy, eval_policies ? eval_policies->value_at : start);
    resolved.eval_policies.push_back({policy, plugin_params(manifest, {}, nullptr, "train.eval_policies")});
  }
  if (const std::string& name = resolved.settings.estimator.baseline_policy; !name.empty()) {
    const Node* estimator = config.find("estimator");
    const Node* at = estimator ? estimator->find("baseline_policy") : nullptr;
    const Manifest& manifest = find_manifest(catalog, PluginKind::policy, name, at ? at->value_at : start);
    resolved.baseline_policy = PluginChoice{name, plugin_params(manifest, {}, nullptr, "estimator.baseline_policy")};
  }
  resolved.toml = to_document(resolved, resolved.host_values_);
  resolved.hash = fnv1a_hex(to_document(resolved, resolved.host_values_, true));
  return resolved;
}

}  // namespace htm
