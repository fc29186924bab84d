// `htm runs`: the recorded runs as a table, newest first, with their final metrics, tags, errors
// and what people added from htm serve's pages (a note, user tags; archived runs only with
// --archived).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "commands/commands.h"
#include "commands/table.h"
#include "config/settings.h"
#include "store/names.h"
#include "store/results_store.h"
#include "study/comparison.h"

namespace po = boost::program_options;

namespace htm {
namespace {
// The sort keys `htm runs --sort` takes besides a metric, as SQL over run_summary s.
const std::map<std::string, std::string>& runs_sort_keys() {
  static const std::map<std::string, std::string> keys = {
      {"id", "s.id"},         {"experiment", "s.experiment"}, {"variant", "s.variant"},    {"seed", "s.seed"},
      {"status", "s.status"}, {"started", "s.started_at"},    {"duration", "s.duration_s"}};
  return keys;
}
// A run's note (its first 60 characters on one line), its user tags, and whether it is archived.
constexpr const char* kAnnotationColumns =
    ", (SELECT CASE WHEN length(n.text) > 60 THEN substr(n.text, 1, 59) || '…' ELSE n.text END "
    "FROM run_notes n WHERE n.run_id = s.id AND n.text != '') AS note, "
    "(SELECT group_concat(u.key || '=' || u.value, ' ') FROM run_user_tags u WHERE u.run_id = s.id) AS user_tags, "
    "(SELECT 'archived' FROM run_archived a WHERE a.run_id = s.id AND a.archived = 1) AS archived";
constexpr const char* kNotArchived =
    "NOT EXISTS (SELECT 1 FROM run_archived a WHERE a.run_id = s.id AND a.archived = 1)";

// The columns named that are empty in every row, dropped (a file without annotations prints as before).
void drop_empty_columns(QueryResult& table, const std::set<std::string>& names) {
  for (size_t c = table.columns.size(); c-- > 0;) {
    if (names.count(table.columns[c]) == 0) continue;
    bool empty = true;
    for (auto& row : table.rows) {
      std::replace(row[c].begin(), row[c].end(), '\n', ' ');  // a note's lines, on one
      empty = empty && row[c].empty();
    }
    if (!empty) continue;
    table.columns.erase(table.columns.begin() + static_cast<std::ptrdiff_t>(c));
    for (auto& row : table.rows) row.erase(row.begin() + static_cast<std::ptrdiff_t>(c));
  }
}

}  // namespace

int cmd_runs(const Args& args) {
  po::options_description opts("options");
  std::string db, experiment, sort = "id";
  std::vector<std::string> metrics;
  int limit = 50;
  bool archived = false;
  opts.add_options()("db", po::value(&db)->default_value(kDefaultResultsPath), "results database")(
      "experiment,e", po::value(&experiment), "only this experiment")("limit,n", po::value(&limit)->default_value(50),
                                                                      "most recent runs to show")(
      "metric,m", po::value(&metrics)->composing(),
      "a final metric column, name (test/name) or split/name (repeatable; default: test/mse and test/accuracy)")(
      "sort", po::value(&sort)->default_value("id"),
      "id (newest first), experiment, variant, seed, status, started, duration, or a metric (smallest first, "
      "runs without it last)")("reverse", "the other way round")(
      "clean", "record runs whose process is gone as killed (htm run resumes them)")(
      "archived", po::bool_switch(&archived), "also the runs archived from htm serve's pages (marked in a column)");
  po::variables_map vm;
  if (!parse_options("runs", args, opts, {}, vm, "[options]")) return 0;
  if (vm.count("clean")) {
    ResultsStore store(db);
    const auto settled = store.settle_stale();
    std::printf("%zu run(s) whose process was gone recorded as killed\n", settled.size());
  }
  ResultsStore store(db, OpenMode::read_only);
  const std::vector<int64_t> stale = store.stale_runs();
  // The metric columns: test/mse and test/accuracy at 5 and 4 decimals as always, or those asked for.
  std::vector<std::pair<std::string, std::string>> columns = {{"test/mse", "printf('%.5f', l.value)"},
                                                              {"test/accuracy", "printf('%.4f', l.value)"}};
  if (!metrics.empty()) columns.clear();
  for (const std::string& m : metrics) {  // a metric no run logged is a misspelling, not an empty column
    columns.emplace_back(qualified_metric(m, "test"), "printf('%.6g', l.value)");
    require_metric(store, "--metric " + m, m, columns.back().first);
  }
  std::string select = "SELECT s.id, s.experiment, s.variant, s.seed, s.status, s.started_at, s.duration_s";
  std::vector<SqlValue> params;
  auto metric_sql = [&](const std::string& metric, const std::string& cell) {
    const size_t slash = metric.find('/');
    params.emplace_back(metric.substr(0, slash));
    params.emplace_back(metric.substr(slash + 1));
    return latest_metric_sql(cell, "s.id");
  };
  for (const auto& [metric, cell] : columns) {
    std::string alias = metric;
    std::replace(alias.begin(), alias.end(), '/', '_');
    select += ", " + metric_sql(metric, cell) + " AS \"" + alias + "\"";
  }
  select += ", (SELECT group_concat(key || '=' || value, ' ') FROM tags t WHERE t.run_id = s.id) AS tags, s.error";
  // What people added from htm serve's pages (store/annotations.h), in columns shown only where a run has one.
  const bool annotated = store.has_annotations();
  if (annotated) select += kAnnotationColumns;
  select += " FROM run_summary s";
  std::vector<std::string> where;
  if (!experiment.empty()) {
    where.push_back("s.experiment = ?");
    params.push_back(experiment);
  }
  if (annotated && !archived) where.push_back(kNotArchived);
  for (size_t i = 0; i < where.size(); ++i) select += (i ? " AND " : " WHERE ") + where[i];
  const bool reverse = vm.count("reverse") > 0;
  if (auto key = runs_sort_keys().find(sort); key != runs_sort_keys().end()) {
    const bool descending = (sort == "id") != reverse;  // the newest first, as always
    // By id alone SQLite walks the rowid and stops at the limit; a tie-breaker would make it sort every run.
    select += " ORDER BY " + key->second + (descending ? " DESC" : " ASC") + (sort == "id" ? "" : ", s.id DESC");
  } else {
    const std::string metric = qualified_metric(sort, "test");  // a bare name is the test split's
    std::vector<std::string> keys;
    for (const auto& [key, sql] : runs_sort_keys()) keys.push_back(key);
    require_metric(store, "--sort " + sort + " (not id, experiment, variant, seed, status, started or duration)", sort,
                   metric, keys);
    select += " ORDER BY " + metric_sql(metric, "l.value") + (reverse ? " DESC" : " ASC") + " NULLS LAST, s.id DESC";
  }
  params.push_back(static_cast<int64_t>(limit));
  auto result = store.query(select + " LIMIT ?", params);
  for (auto& row : result.rows)  // a running row whose process is gone is shown as what it is
    if (std::find(stale.begin(), stale.end(), std::atoll(row[0].c_str())) != stale.end()) row[4] = "killed*";
  drop_empty_columns(result, {"note", "user_tags", "archived"});
  std::printf("%s", format_table(result).c_str());
  if (annotated && !archived) {
    const std::string count = "SELECT count(*) FROM run_summary s WHERE NOT " + std::string(kNotArchived) +
                              (experiment.empty() ? "" : " AND s.experiment = ?");
    const auto hidden =
        store.query(count, experiment.empty() ? std::vector<SqlValue>{} : std::vector<SqlValue>{experiment});
    if (hidden.rows[0][0] != "0")
      std::printf("\n%s archived run(s) not shown: htm runs --archived shows them\n", hidden.rows[0][0].c_str());
  }
  if (!stale.empty())
    std::printf(
        "\n* its process is gone; `htm runs --clean` (or the next `htm run`) records it killed, and "
        "`htm run` resumes it\n");
  return 0;
}
const RegisterCommand register_runs(50, "runs", "list recorded runs", cmd_runs);

}  // namespace htm
