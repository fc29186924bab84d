// Parameter values: their names in messages, their TOML spelling and typed access.
#include "htm/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "htm/error.h"

namespace htm {
namespace {

std::string with_article(const std::string& noun) {
  return (std::string_view("aeiou").find(noun[0]) != std::string_view::npos ? "an " : "a ") + noun;
}

std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The shortest spelling that reads back as the same double, and reads back as a float at all.
std::string toml_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[32];
  for (int precision = 1;; ++precision) {
    char* end = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::general, precision).ptr;
    double back = 0;
    std::from_chars(buffer, end, back);
    if (back != x && precision < 17) continue;
    std::string text(buffer, end);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    return text;
  }
}

struct Spell {
  std::string operator()(bool flag) const { return flag ? "true" : "false"; }
  std::string operator()(int64_t integer) const { return std::to_string(integer); }
  std::string operator()(double number) const { return toml_float(number); }
  std::string operator()(const std::string& text) const { return toml_string(text); }
  template <typename T>
  std::string operator()(const std::vector<T>& items) const {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + (*this)(items[i]);
    return out + "]";
  }
};

template <typename T>
const T& typed(const Params& params, const std::string& name, ValueType type) {
  const Value& value = params.at(name);
  if (const T* typed_value = std::get_if<T>(&value)) return *typed_value;
  throw Error("parameter '" + name + "' is " + with_article(type_name(type_of(value))) + ", expected " +
              with_article(type_name(type)));
}

}  // namespace

const char* type_name(ValueType type) {
  switch (type) {
    case ValueType::boolean:
      return "bool";
    case ValueType::integer:
      return "int";
    case ValueType::floating:
      return "float";
    case ValueType::string:
      return "string";
    case ValueType::integer_list:
      return "int list";
    case ValueType::float_list:
      return "float list";
    case ValueType::string_list:
      return "string list";
  }
  return "unknown type";
}

// Value's alternatives are declared in ValueType's order.
ValueType type_of(const Value& value) { return static_cast<ValueType>(value.index()); }

std::string to_toml(const Value& value) { return std::visit(Spell{}, value); }

const Value& Params::at(const std::string& name) const {
  auto found = values_.find(name);
  if (found == values_.end()) throw Error("parameter '" + name + "' is missing");
  return found->second;
}

bool Params::flag(const std::string& name) const { return typed<bool>(*this, name, ValueType::boolean); }

int64_t Params::integer(const std::string& name) const { return typed<int64_t>(*this, name, ValueType::integer); }

int64_t Params::integer_or(const std::string& name, int64_t zero_means) const {
  const int64_t value = integer(name);
  if (value < 0) throw Error(name + " must be 0 (its default) or more, got " + std::to_string(value));
  return value == 0 ? zero_means : value;
}

double Params::number(const std::string& name) const {
  if (const auto* integer = std::get_if<int64_t>(&at(name))) return static_cast<double>(*integer);
  return typed<double>(*this, name, ValueType::floating);
}

const std::string& Params::text(const std::string& name) const {
  return typed<std::string>(*this, name, ValueType::string);
}

std::vector<int64_t> Params::integers(const std::string& name) const {
  return typed<std::vector<int64_t>>(*this, name, ValueType::integer_list);
}

std::vector<double> Params::numbers(const std::string& name) const {
  if (const auto* integers = std::get_if<std::vector<int64_t>>(&at(name))) {
    return std::vector<double>(integers->begin(), integers->end());
  }
  return typed<std::vector<double>>(*this, name, ValueType::float_list);
}

std::vector<std::string> Params::texts(const std::string& name) const {
  return typed<std::vector<std::string>>(*this, name, ValueType::string_list);
}

}  // namespace htm
