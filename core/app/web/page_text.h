// The text of the pages of `htm report` and `htm serve`: JSON written by hand (a TOML basic
// string, to_toml, is also a valid JSON string; '<' is escaped on top so that no "</script>" can
// end a page's data early; NaN and infinities become null), the templates' substitutions, and a
// page assembled from its assets (web/assets.h).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "htm/value.h"
#include "web/assets.h"

namespace htm::page {

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

/// `text` with every `from` replaced by `to` (a template's placeholders).
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// `text` safe between HTML tags (a page's title).
inline std::string escape_html(const std::string& text) {
  return replace_all(replace_all(text, "&", "&amp;"), "<", "&lt;");
}

/// `code` as an inline script.
inline std::string script(const std::string& code) { return "<script>\n" + code + "</script>\n"; }

/// A whole page: the head with `title` (escaped) and `styles`, the #errors box and the script
/// every page shares (assets::page_js, assets::charts_js), then `body` (its HTML and scripts, in order).
inline std::string document(const std::string& title, const std::string& styles, const std::string& body) {
  return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\">\n<title>" +
         escape_html(title) + "</title>\n<style>\n" + styles + "</style></head><body>\n<div id=\"errors\"></div>\n" +
         script(assets::page_js) + script(assets::charts_js) + body + "</body></html>\n";
}

}  // namespace htm::page
