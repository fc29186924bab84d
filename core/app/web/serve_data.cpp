// The JSON behind `htm serve`'s pages. Every value from the database leaves through page::quote
// or page::number, and every value from a request reaches SQL as a bound parameter, never as
// SQL text: the only text spliced in is chosen from fixed lists here.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include <boost/math/distributions/fisher_f.hpp>

#include "web/page_text.h"
#include "web/serve.h"

namespace htm::serve {
namespace {

using page::array;
using page::number;
using page::quote;

// A run's final value of a metric (its latest_metrics value: one index seek a run), and the same
// as text with 9 digits ("" where there is none, or it is NULL).
const std::string kFinal = latest_metric_sql("l.value", "r.id");
const std::string kFinalText =
    latest_metric_sql("CASE WHEN l.value IS NULL THEN NULL ELSE printf('%.9g', l.value) END", "r.id");

// The metrics a runs table shows when none are asked for: whichever of these a page's runs have.
const std::vector<std::string> kTaskMetrics = {"test/mse", "test/accuracy", "test/cluster_f1", "test/sibling_f1"};

std::pair<std::string, std::string> split_metric(const std::string& metric) {
  const size_t slash = metric.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == metric.size())
    throw BadRequest("metric '" + metric + "': expected split/name, e.g. test/mse");
  return {metric.substr(0, slash), metric.substr(slash + 1)};
}

struct Condition {
  std::string key, op, value;
};

Condition parse_condition(const std::string& text) {
  static const std::vector<std::string> ops = {"<=", ">=", "!=", "=", "<", ">", "~"};
  size_t at = std::string::npos;
  std::string op;
  for (const std::string& candidate : ops) {  // the leftmost operator; at one place the longest
    const size_t found = text.find(candidate);
    if (found != std::string::npos && (found < at || (found == at && candidate.size() > op.size())))
      at = found, op = candidate;
  }
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    return s;
  };
  if (at == std::string::npos || at == 0)
    throw BadRequest("filter '" + text +
                     "': expected KEY OP VALUE with OP one of = != < <= > >= ~ (e.g. test/mse<0.2)");
  Condition c{trim(text.substr(0, at)), op, trim(text.substr(at + op.size()))};
  if (c.key.empty()) throw BadRequest("filter '" + text + "': no key before " + op);
  return c;
}

bool numeric_op(const std::string& op) { return op == "<" || op == "<=" || op == ">" || op == ">="; }

double to_number(const Condition& c) {
  try {
    size_t used = 0;
    const double v = std::stod(c.value, &used);
    if (used == c.value.size()) return v;
  } catch (const std::exception&) {
  }
  throw BadRequest("filter '" + c.key + c.op + c.value + "': " + c.op + " needs a number, got '" + c.value + "'");
}

// A runs column a filter or the sort may name, as SQL.
const std::map<std::string, std::string>& run_columns() {
  static const std::map<std::string, std::string> columns = {
      {"id", "r.id"},
      {"experiment", "e.name"},
      {"variant", "r.variant"},
      {"seed", "r.seed"},
      {"status", "r.status"},
      {"git", "r.git_revision"},
      {"config_hash", "r.config_hash"},
      {"started", "r.started_at"},
      {"duration", "(coalesce(r.ended_at, r.heartbeat_at, r.started_at) - r.started_at)"}};
  return columns;
}

// `subject OP ?` for one condition, its values appended to `params`. Text compares as text, and
// a setting (stored as TOML text) also matches its unquoted form: policy.plugin=learned.
std::string compare(const std::string& subject, const Condition& c, bool toml_text, std::vector<SqlValue>& params) {
  if (numeric_op(c.op)) {
    params.emplace_back(to_number(c));
    return "CAST(" + subject + " AS REAL) " + c.op + " ?";
  }
  if (c.op == "~") {
    params.emplace_back("%" + c.value + "%");
    return subject + " LIKE ?";
  }
  const std::string quoted = "\"" + c.value + "\"";
  const std::string sql = toml_text ? subject + " IN (?, ?)" : subject + " = ?";
  params.emplace_back(c.value);
  if (toml_text) params.emplace_back(quoted);
  return c.op == "!=" ? "coalesce(NOT " + sql + ", 1)" : sql;
}

std::string condition_sql(const Condition& c, std::vector<SqlValue>& params) {
  const auto& columns = run_columns();
  if (auto found = columns.find(c.key); found != columns.end()) {
    const bool number_column = c.key == "id" || c.key == "seed" || c.key == "started" || c.key == "duration";
    if (number_column && !numeric_op(c.op) && c.op != "~") {
      params.emplace_back(to_number(c));
      return found->second + (c.op == "!=" ? " != ?" : " = ?");
    }
    return compare(found->second, c, false, params);
  }
  if (c.key.rfind("tag.", 0) == 0) {
    params.emplace_back(c.key.substr(4));
    return "EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = ? AND " +
           compare("t.value", c, false, params) + ")";
  }
  if (c.key.find('/') != std::string::npos) {
    const auto [split, name] = split_metric(c.key);
    params.emplace_back(split);
    params.emplace_back(name);
    if (!numeric_op(c.op) && c.op != "~") {
      params.emplace_back(to_number(c));
      return std::string(kFinal) + (c.op == "!=" ? " != ?" : " = ?");
    }
    return compare(kFinal, c, false, params);
  }
  params.emplace_back(c.key);
  return compare("(SELECT p.value FROM params p WHERE p.run_id = r.id AND p.key = ?)", c, true, params);
}

std::string in_list(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + std::to_string(std::stoll(id));
  return "(" + out + ")";
}

std::string rows_json(const QueryResult& result) {
  return array(result.rows, [](const std::vector<std::string>& row) { return array(row, quote); });
}

}  // namespace

namespace {

// The runs table's filters as SQL (" WHERE 1 AND ..."), their values appended to `params`.
std::string runs_filter(const RunsQuery& query, std::vector<SqlValue>& params) {
  std::string where = " WHERE 1";
  if (!query.experiment.empty()) {
    where += " AND e.name = ?";
    params.emplace_back(query.experiment);
  }
  if (!query.status.empty()) {
    where += " AND r.status = ?";
    params.emplace_back(query.status);
  }
  for (const std::string& text : query.where) {
    if (text.find_first_not_of(' ') == std::string::npos) continue;
    where += " AND " + condition_sql(parse_condition(text), params);
  }
  return where;
}

// The runs table's sort key as SQL, a metric's split and name appended to `params`.
std::string runs_order(const RunsQuery& query, std::vector<SqlValue>& params) {
  if (auto found = run_columns().find(query.sort); found != run_columns().end()) return found->second;
  if (query.sort.find('/') == std::string::npos)
    throw BadRequest("sort '" + query.sort +
                     "': expected id, experiment, variant, seed, status, started, duration "
                     "or a metric split/name");
  const auto [split, name] = split_metric(query.sort);
  params.emplace_back(split);
  params.emplace_back(name);
  return kFinal;
}

// A page's runs as JSON; row[10 + i] holds the final value of columns[i], given where shown[i].
std::string runs_rows_json(const std::vector<std::vector<std::string>>& rows, const std::vector<std::string>& columns,
                           const std::vector<bool>& shown) {
  std::string out = "[";
  for (const auto& row : rows) {
    std::string values = "{";
    for (size_t i = 0; i < columns.size(); ++i)
      if (shown[i] && !row[10 + i].empty())
        values += (values.size() > 1 ? "," : "") + quote(columns[i]) + ":" + number(std::stod(row[10 + i]));
    out += (out.size() > 1 ? "," : "") + std::string("{\"id\":") + row[0] + ",\"experiment\":" + quote(row[1]) +
           ",\"variant\":" + quote(row[2]) + ",\"seed\":" + (row[3].empty() ? "null" : row[3]) +
           ",\"status\":" + quote(row[4]) + ",\"started\":" + number(row[5].empty() ? NAN : std::stod(row[5])) +
           ",\"ended\":" + number(row[6].empty() ? NAN : std::stod(row[6])) + ",\"error\":" + quote(row[7]) +
           ",\"git\":" + quote(row[8]) + ",\"tags\":" + quote(row[9]) + ",\"final\":" + values + "}}";
  }
  return out + "]";
}

// What a filter may name, from one run of each experiment on the page (`samples`; a few index
// seeks): ",\"settings\":[...],\"metrics\":[...]".
std::string filter_names_json(ResultsStore& store, const std::vector<std::string>& samples) {
  std::string settings = "[]", metrics = "[]";
  if (!samples.empty()) {
    const auto keys =
        store.query("SELECT DISTINCT key FROM params WHERE run_id IN " + in_list(samples) + " ORDER BY key");
    std::vector<std::string> names;
    for (const auto& row : keys.rows) names.push_back(row[0]);
    settings = array(names, quote);
    const auto logged = store.query("SELECT DISTINCT split || '/' || name FROM metrics WHERE run_id IN " +
                                    in_list(samples) + " ORDER BY 1");
    names.clear();
    for (const auto& row : logged.rows) names.push_back(row[0]);
    metrics = array(names, quote);
  }
  return ",\"settings\":" + settings + ",\"metrics\":" + metrics;
}

}  // namespace

std::string runs_json(ResultsStore& store, const RunsQuery& query) {
  std::vector<SqlValue> where_params, params;
  const std::string where = runs_filter(query, where_params);
  const std::string order = runs_order(query, params);
  const std::string from = " FROM runs r JOIN experiments e ON e.id = r.experiment_id";
  params.insert(params.end(), where_params.begin(), where_params.end());
  // The filters and the sort key are computed once per run (f), the count and the page (p) from
  // them, and the shown columns only for the page's runs.
  const int64_t size = std::clamp<int64_t>(query.size, 1, 500), page = std::max<int64_t>(query.page, 0);
  const std::string direction = query.descending ? " DESC" : " ASC";
  std::string select =
      "WITH f AS MATERIALIZED (SELECT r.id AS id, " + order + " AS sort_key" + from + where +
      "), p AS (SELECT id, sort_key FROM f ORDER BY sort_key" + direction + " NULLS LAST, id DESC LIMIT " +
      std::to_string(size) + " OFFSET " + std::to_string(page * size) +
      ") SELECT (SELECT count(*) FROM f), r.id, e.name, coalesce(r.variant, ''), r.seed, r.status, "
      "printf('%.3f', r.started_at), printf('%.3f', coalesce(r.ended_at, r.heartbeat_at, r.started_at)), "
      "coalesce(r.error, ''), coalesce(r.git_revision, ''), "
      "coalesce((SELECT group_concat(t.key || '=' || t.value, ' ') FROM tags t WHERE t.run_id = r.id), '')";
  std::vector<std::string> columns = query.columns.empty() ? kTaskMetrics : query.columns;
  for (const std::string& metric : columns) {
    const auto [split, name] = split_metric(metric);
    select += ", " + std::string(kFinalText);
    params.emplace_back(split);
    params.emplace_back(name);
  }
  const std::string sql = select + " FROM p JOIN runs r ON r.id = p.id JOIN experiments e ON e.id = r.experiment_id" +
                          " ORDER BY p.sort_key" + direction + " NULLS LAST, r.id DESC";
  auto runs = store.query(sql, params);
  int64_t total = 0;
  if (!runs.rows.empty())
    total = std::stoll(runs.rows.front().front());
  else if (page > 0)  // past the last page: the count alone
    total = std::stoll(store.query("SELECT count(*)" + from + where, where_params).rows.at(0).at(0));
  for (auto& row : runs.rows) row.erase(row.begin());

  // Shown: the asked-for metrics, or the task metrics any run of this page has.
  std::vector<bool> shown(columns.size(), !query.columns.empty());
  for (const auto& row : runs.rows)
    for (size_t i = 0; i < columns.size(); ++i) shown[i] = shown[i] || !row[10 + i].empty();
  std::vector<std::string> samples, shown_columns;  // samples: the page's first run of each experiment
  std::set<std::string> seen;
  for (const auto& row : runs.rows)
    if (seen.insert(row[1]).second) samples.push_back(row[0]);
  for (size_t i = 0; i < columns.size(); ++i)
    if (shown[i]) shown_columns.push_back(columns[i]);
  const auto experiments = store.query(
      "SELECT e.name, count(r.id), sum(r.status = 'running') FROM experiments e "
      "LEFT JOIN runs r ON r.experiment_id = e.id GROUP BY e.id ORDER BY e.name");
  return "{\"total\":" + std::to_string(total) + ",\"page\":" + std::to_string(page) +
         ",\"size\":" + std::to_string(size) + ",\"columns\":" + array(shown_columns, quote) +
         ",\"runs\":" + runs_rows_json(runs.rows, columns, shown) + ",\"experiments\":" + rows_json(experiments) +
         filter_names_json(store, samples) + "}";
}

std::string run_json(ResultsStore& store, int64_t run_id, int64_t after, int64_t limit) {
  const auto run = store.query(
      "SELECT r.id, e.name, coalesce(r.variant, ''), coalesce(r.seed, ''), r.status, "
      "printf('%.3f', r.started_at), printf('%.3f', coalesce(r.ended_at, r.heartbeat_at, r.started_at)), "
      "coalesce(r.error, ''), coalesce(r.git_revision, ''), coalesce(r.config_hash, ''), "
      "coalesce(r.uuid, ''), coalesce(r.artifact_dir, ''), "
      "coalesce((SELECT group_concat(t.key || '=' || t.value, ' ') FROM tags t WHERE t.run_id = r.id), '') "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.id = ?",
      {run_id});
  if (run.rows.empty()) throw BadRequest("no run " + std::to_string(run_id) + " in this database");
  const auto& r = run.rows[0];
  const std::vector<std::string> names = {"id",    "experiment", "variant",     "seed", "status",    "started", "ended",
                                          "error", "git",        "config_hash", "uuid", "artifacts", "tags"};
  // Numbers as numbers, as /api/runs gives them: id, seed (null when none), started, ended.
  auto value = [&](size_t i) {
    if (i == 0) return r[i];
    if (i == 3) return r[i].empty() ? std::string("null") : r[i];
    if (i == 5 || i == 6) return number(r[i].empty() ? NAN : std::stod(r[i]));
    return quote(r[i]);
  };
  std::string record = "{";
  for (size_t i = 0; i < names.size(); ++i) record += (i ? "," : "") + quote(names[i]) + ":" + value(i);
  record += "}";
  std::string params = "null";
  if (after <= 0)
    params = rows_json(store.query("SELECT key, value FROM params WHERE run_id = ? ORDER BY key", {run_id}));
  limit = std::clamp<int64_t>(limit, 1, 100000);
  const auto metrics = store.query(
      "SELECT rowid, split || '/' || name, step, printf('%.9g', value) FROM metrics "
      "WHERE run_id = ? AND rowid > ? AND value IS NOT NULL ORDER BY rowid LIMIT ?",
      {run_id, after, limit + 1});
  const bool more = static_cast<int64_t>(metrics.rows.size()) > limit;
  std::string points = "[";
  int64_t last = after;
  for (size_t i = 0; i < metrics.rows.size() && static_cast<int64_t>(i) < limit; ++i) {
    const auto& m = metrics.rows[i];
    last = std::stoll(m[0]);
    points += (points.size() > 1 ? "," : "") + std::string("[") + m[0] + "," + quote(m[1]) + "," + m[2] + "," +
              number(std::stod(m[3])) + "]";
  }
  points += "]";
  const auto artifacts = store.query(
      "SELECT kind, path, coalesce(step, '') FROM artifacts WHERE run_id = ? ORDER BY step, rowid", {run_id});
  std::string pictures = "[";
  const std::filesystem::path dir = r[11];
  for (const auto& a : artifacts.rows) {
    const std::filesystem::path path = a[1];
    const std::string relative = dir.empty() ? "" : path.lexically_relative(dir).generic_string();
    if (relative.empty() || relative.rfind("..", 0) == 0) continue;  // not under its own folder: not served
    pictures += (pictures.size() > 1 ? "," : "") + std::string("{\"kind\":") + quote(a[0]) +
                ",\"file\":" + quote(relative) + ",\"step\":" + (a[2].empty() ? "null" : a[2]) + "}";
  }
  pictures += "]";
  return "{\"run\":" + record + ",\"params\":" + params + ",\"metrics\":" + points +
         ",\"last\":" + std::to_string(last) + ",\"more\":" + (more ? "true" : "false") + ",\"artifacts\":" + pictures +
         "}";
}

std::string study_version(ResultsStore& store, const std::string& experiment) {
  const auto runs = store.query(
      "SELECT count(*), coalesce(sum(r.status = 'running'), 0), coalesce(group_concat(r.status, ''), ''), "
      "printf('%.3f', coalesce(max(r.ended_at), 0)) "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = ?",
      {experiment});
  const auto& row = runs.rows.at(0);
  if (row[0] == "0") throw BadRequest("no runs of experiment '" + experiment + "' in this database");
  // While a run trains, any new metric row may be one of its: the newest rowid is one seek.
  std::string newest = "0";
  if (row[1] != "0") newest = store.query("SELECT coalesce(max(rowid), 0) FROM metrics").rows.at(0).at(0);
  return "{\"runs\":" + row[0] + ",\"running\":" + row[1] + ",\"version\":" +
         quote(row[0] + ":" + std::to_string(std::hash<std::string>{}(row[2])) + ":" + row[3] + ":" + newest) + "}";
}

namespace {

// setting → run position → value, for the settings that differ between the runs `ids`.
std::map<std::string, std::vector<std::string>> differing_settings(ResultsStore& store,
                                                                   const std::vector<std::string>& ids) {
  std::map<std::string, std::vector<std::string>> settings;
  std::map<int64_t, size_t> position;
  for (size_t i = 0; i < ids.size(); ++i) position[std::stoll(ids[i])] = i;
  const auto params = store.query("SELECT run_id, key, coalesce(value, '') FROM params WHERE run_id IN " +
                                  in_list(ids) + " AND key NOT LIKE 'experiment.%' AND key NOT LIKE 'runtime.%'");
  for (const auto& row : params.rows) {
    auto& column = settings[row[1]];
    if (column.empty()) column.assign(ids.size(), "(unset)");
    column[position[std::stoll(row[0])]] = row[2];
  }
  for (auto it = settings.begin(); it != settings.end();) {
    const std::set<std::string> distinct(it->second.begin(), it->second.end());
    it = distinct.size() < 2 ? settings.erase(it) : std::next(it);
  }
  return settings;
}

// A setting's eta squared: the between-group sum of squares over the total, grouping the runs'
// `values` by the setting's value (`column`); with the one-way ANOVA's F test. As JSON.
std::string setting_importance(const std::string& key, const std::vector<std::string>& column,
                               const std::vector<double>& values) {
  const double grand = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  double total = 0;
  for (double v : values) total += (v - grand) * (v - grand);
  std::map<std::string, std::pair<double, size_t>> groups;  // value → (sum, n)
  for (size_t i = 0; i < column.size(); ++i) groups[column[i]].first += values[i], ++groups[column[i]].second;
  double between = 0;
  for (const auto& [value, group] : groups) {
    const double mean = group.first / static_cast<double>(group.second);
    between += static_cast<double>(group.second) * (mean - grand) * (mean - grand);
  }
  const double k = static_cast<double>(groups.size()), n = static_cast<double>(values.size());
  const double eta = total > 0 ? between / total : NAN;
  double p = NAN;
  if (total > 0 && k > 1 && n > k) {
    const double within = total - between;
    const double f = within > 0 ? (between / (k - 1)) / (within / (n - k)) : INFINITY;
    p = std::isfinite(f) ? boost::math::cdf(boost::math::complement(boost::math::fisher_f(k - 1, n - k), f)) : 0.0;
  }
  return "{\"setting\":" + quote(key) + ",\"levels\":" + std::to_string(groups.size()) + ",\"eta2\":" + number(eta) +
         ",\"p\":" + number(p) + "}";
}

}  // namespace

std::string sweep_json(ResultsStore& store, const std::string& experiment, const std::string& metric,
                       const std::string& phase) {
  if (phase != "explore" && phase != "confirm") throw BadRequest("phase '" + phase + "': expected explore or confirm");
  const auto [split, name] = split_metric(metric);
  const auto runs =
      store.query("SELECT r.id, coalesce(r.variant, ''), coalesce(r.seed, ''), " + std::string(kFinalText) +
                      " FROM runs r JOIN experiments e ON e.id = r.experiment_id "
                      "WHERE e.name = ? AND r.status = 'finished' AND "
                      "coalesce((SELECT t.value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), 'explore') = ? "
                      "ORDER BY r.id",
                  {split, name, experiment, phase});
  std::vector<std::string> ids, variants, seeds;
  std::vector<double> values;
  for (const auto& row : runs.rows) {
    if (row[3].empty()) continue;  // a finished run that never logged the metric
    ids.push_back(row[0]);
    variants.push_back(row[1]);
    seeds.push_back(row[2]);
    values.push_back(std::stod(row[3]));
  }
  if (ids.empty())
    throw BadRequest("no finished " + phase + " run of '" + experiment + "' logged " + metric +
                     " (the study's page lists what it logged)");
  const auto settings = differing_settings(store, ids);
  auto importance = [&values](const std::string& key, const std::vector<std::string>& column) {
    return setting_importance(key, column, values);
  };
  std::vector<std::string> rows;  // the variant is one more "setting": all of its differences together
  rows.push_back(importance("variant", variants));
  for (const auto& [key, column] : settings) rows.push_back(importance(key, column));
  std::vector<std::string> keys;
  for (const auto& [key, column] : settings) keys.push_back(key);
  std::string table = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<std::string> line;
    for (const auto& [key, column] : settings) line.push_back(column[i]);
    table += (i ? "," : "") + std::string("{\"id\":") + ids[i] + ",\"variant\":" + quote(variants[i]) +
             ",\"seed\":" + quote(seeds[i]) + ",\"value\":" + number(values[i]) +
             ",\"settings\":" + array(line, quote) + "}";
  }
  table += "]";
  const auto logged = store.query("SELECT DISTINCT split || '/' || name FROM metrics WHERE run_id = ? ORDER BY 1",
                                  {static_cast<int64_t>(std::stoll(ids.front()))});
  std::vector<std::string> metrics;
  for (const auto& row : logged.rows) metrics.push_back(row[0]);
  return "{\"experiment\":" + quote(experiment) + ",\"metric\":" + quote(metric) + ",\"phase\":" + quote(phase) +
         ",\"metrics\":" + array(metrics, quote) + ",\"settings\":" + array(keys, quote) + ",\"runs\":" + table +
         ",\"importance\":" + array(rows, [](const std::string& s) { return s; }) + "}";
}

std::string artifact_path(ResultsStore& store, int64_t run_id, const std::string& relative) {
  const auto found = store.query("SELECT coalesce(artifact_dir, '') FROM runs WHERE id = ?", {run_id});
  if (found.rows.empty() || found.rows[0][0].empty()) return "";
  const std::filesystem::path wanted(relative);
  if (relative.empty() || wanted.is_absolute()) return "";
  for (const auto& part : wanted)
    if (part == "..") return "";
  std::error_code ec;
  const auto root = std::filesystem::canonical(found.rows[0][0], ec);
  if (ec) return "";
  const auto file = std::filesystem::canonical(root / wanted, ec);  // resolves links: one out is refused below
  if (ec || !std::filesystem::is_regular_file(file, ec)) return "";
  const auto inside = file.lexically_relative(root);
  if (inside.empty() || *inside.begin() == "..") return "";
  return file.string();
}

}  // namespace htm::serve
