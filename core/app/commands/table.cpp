#include "commands/table.h"

#include <algorithm>
#include <cctype>

namespace htm {
namespace {

// What query() prints for integers and %.6g reals: sign, digits, point, exponent, or inf.
bool looks_numeric(const std::string& text) {
  size_t i = 0, n = text.size();
  if (i < n && (text[i] == '-' || text[i] == '+')) ++i;
  if (text.compare(i, std::string::npos, "inf") == 0) return true;
  size_t digits = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < n && text[i] == '.') {
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '-' || text[i] == '+')) ++i;
    size_t exponent_digits = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == n;
}

// Columns are measured in code points, so UTF-8 names line up.
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

// One line per row: line breaks and tabs inside a cell would break the alignment.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

}  // namespace

std::string format_table(const QueryResult& result) {
  if (result.rows.empty()) return "(no rows)\n";
  size_t count = result.columns.size();
  std::vector<size_t> widths(count);
  std::vector<bool> numeric(count, true);
  for (size_t c = 0; c < count; ++c) widths[c] = display_width(one_line(result.columns[c]));
  for (const auto& row : result.rows) {
    for (size_t c = 0; c < count && c < row.size(); ++c) {
      widths[c] = std::max(widths[c], display_width(one_line(row[c])));
      if (!row[c].empty() && !looks_numeric(row[c])) numeric[c] = false;
    }
  }

  std::string out;
  auto add_line = [&](auto cell_of) {
    std::string line;
    for (size_t c = 0; c < count; ++c) {
      std::string text = one_line(cell_of(c));
      std::string padding(widths[c] - display_width(text), ' ');
      if (c > 0) line += "  ";
      line += numeric[c] ? padding + text : text + padding;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  add_line([&](size_t c) { return result.columns[c]; });
  add_line([&](size_t c) { return std::string(widths[c], '-'); });
  for (const auto& row : result.rows) {
    add_line([&](size_t c) { return c < row.size() ? row[c] : std::string(); });
  }
  return out;
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace htm
