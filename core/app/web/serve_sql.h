// What serve_runs.cpp (the runs table) and serve_data.cpp (a run, a study's version, a sweep)
// share: a run's final value of a metric as SQL, a metric's split and name, id lists and rows
// as JSON. Internal to htm serve.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "store/results_store.h"
#include "web/page_text.h"
#include "web/serve.h"

namespace htm::serve {

/// A run's final value of a metric (its latest_metrics value: one index seek a run); binds the
/// split and the name, and reads the run from r.id.
inline const std::string& final_sql() {
  static const std::string sql = latest_metric_sql("l.value", "r.id");
  return sql;
}

/// The same as text with 9 digits ("" where there is none, or it is NULL).
inline const std::string& final_text_sql() {
  static const std::string sql =
      latest_metric_sql("CASE WHEN l.value IS NULL THEN NULL ELSE printf('%.9g', l.value) END", "r.id");
  return sql;
}

inline std::pair<std::string, std::string> split_metric(const std::string& metric) {
  const size_t slash = metric.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == metric.size())
    throw BadRequest("metric '" + metric + "': expected split/name, e.g. test/mse");
  return {metric.substr(0, slash), metric.substr(slash + 1)};
}

/// "(3,7,12)": ids that came from the database, read back as integers.
inline std::string in_list(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + std::to_string(std::stoll(id));
  return "(" + out + ")";
}

inline std::string rows_json(const QueryResult& result) {
  return page::array(result.rows, [](const std::vector<std::string>& row) { return page::array(row, page::quote); });
}

}  // namespace htm::serve
