// Query results as an aligned plain-text table, as `htm runs`, `query`, `plugins` and `compare`
// print them.
#pragma once

#include <string>

#include "store/results_store.h"

namespace htm {

/// Columns padded (numbers to the right), a rule under the header; "(no rows)" when empty.
std::string format_table(const QueryResult& result);

/// One CSV field: as it is, or quoted (its quotes doubled) where it holds a comma, quote or newline.
std::string csv_cell(const std::string& text);

}  // namespace htm
