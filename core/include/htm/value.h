// Typed parameter values shared by experiment files, plugin manifests and the results store.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace htm {

/// The types a parameter can have. A TOML integer is accepted where a float is expected.
enum class ValueType { boolean, integer, floating, string, integer_list, float_list, string_list };

/// One parameter value. Lists hold homogeneous scalars.
using Value = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                           std::vector<std::string>>;

/// "bool", "int", "float", "string", "int list", ... as users read them in messages.
const char* type_name(ValueType type);
ValueType type_of(const Value& value);
/// TOML spelling of a value, e.g. `0.0001`, `"mlp"`, `[128, 64]`.
std::string to_toml(const Value& value);

/// A declared parameter: what experiment files may set and what a plugin reads.
struct ParamSpec {
  std::string name;  ///< key inside the plugin's (or section's) table
  ValueType type;
  Value default_value;      ///< must hold `type`
  std::string description;  ///< one line, shown by `htm plugins --verbose` and in docs
};

/// Resolved parameters handed to a plugin: every declared key is present (defaults filled in).
class Params {
 public:
  Params() = default;
  explicit Params(std::map<std::string, Value> values) : values_(std::move(values)) {}

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const Value& at(const std::string& name) const;  ///< throws htm::Error naming the key
  bool flag(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  /// An integer whose 0 stands for a default: `zero_means` where it is 0; a negative value throws
  /// htm::Error naming the key (SDK 6.2).
  int64_t integer_or(const std::string& name, int64_t zero_means) const;
  double number(const std::string& name) const;  ///< float, or an integer widened
  const std::string& text(const std::string& name) const;
  std::vector<int64_t> integers(const std::string& name) const;
  std::vector<double> numbers(const std::string& name) const;
  std::vector<std::string> texts(const std::string& name) const;

  void set(const std::string& name, Value value) { values_[name] = std::move(value); }
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  std::map<std::string, Value> values_;
};

}  // namespace htm
