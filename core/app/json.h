// JSON written by hand, for the pages of `htm report` and `htm serve`. A TOML basic string
// (to_toml) is also a valid JSON string; '<' is escaped on top so that no "</script>" can end a
// page's data early. NaN and infinities become null.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "htm/value.h"

namespace htm::json {

inline std::string quote(const std::string& text) {
  std::string out;
  for (char c : to_toml(Value(text))) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return out;
}

inline std::string number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", value);
  return buf;
}

template <class T, class F>
std::string array(const std::vector<T>& items, F&& render) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + render(items[i]);
  return out + "]";
}

inline std::string numbers(const std::vector<double>& v) { return array(v, number); }

}  // namespace htm::json
