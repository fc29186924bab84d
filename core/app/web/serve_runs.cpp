// The runs table of `htm serve` (/api/runs): filters, sort, page, and runs grouped by a setting
// with each group's mean, sd and n of the shown metrics. Every value from a request reaches SQL as
// a bound parameter, never as SQL text: the only text spliced in is chosen from fixed lists here.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "commands/names.h"
#include "web/page_text.h"
#include "web/serve.h"
#include "web/serve_sql.h"

namespace htm::serve {
namespace {

using page::array;
using page::number;
using page::quote;

// The metrics a runs table shows when none are asked for: whichever of these a page's runs have.
const std::vector<std::string> kTaskMetrics = {"test/mse", "test/accuracy", "test/cluster_f1", "test/sibling_f1"};

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
      return final_sql() + (c.op == "!=" ? " != ?" : " = ?");
    }
    return compare(final_sql(), c, false, params);
  }
  params.emplace_back(c.key);
  return compare("(SELECT p.value FROM params p WHERE p.run_id = r.id AND p.key = ?)", c, true, params);
}

// The names a filter or a group key may give besides settings: the runs columns.
std::vector<std::string> column_names() {
  std::vector<std::string> names;
  for (const auto& [name, sql] : run_columns()) names.push_back(name);
  return names;
}

// Why `key` (a setting, tag.NAME or a metric split/name) names nothing any run has, or "" when a
// run has it. A setting is compared with every setting and the runs columns (varaint: variant).
std::string unknown_key(ResultsStore& store, const std::string& key) {
  if (key.rfind("tag.", 0) == 0) {
    if (!store.query("SELECT 1 FROM tags WHERE key = ? LIMIT 1", {key.substr(4)}).rows.empty()) return "";
    std::vector<std::string> tags;
    for (const auto& row : store.query("SELECT DISTINCT 'tag.' || key FROM tags").rows) tags.push_back(row[0]);
    return "no run has a tag '" + key.substr(4) + "'" + did_you_mean(key, tags);
  }
  if (key.find('/') != std::string::npos)
    return metric_logged(store, key) ? ""
                                     : "no run logged a metric '" + key + "'" + did_you_mean(key, known_metrics(store));
  if (setting_known(store, key)) return "";
  std::vector<std::string> names = known_settings(store), columns = column_names();
  names.insert(names.end(), columns.begin(), columns.end());
  const std::string hint = did_you_mean(key, names);
  return "no run has a setting '" + key + "'" + (hint.empty() ? " (a metric is split/name, a tag tag.NAME)" : hint);
}

// A filter on a name no run has is a misspelling until shown otherwise: refused, naming the
// nearest real one. Asked of every filter when the filters matched nothing (one scan of the
// settings, only then), and always of a != on a setting or tag (runs without it match it).
void refuse_unknown_keys(ResultsStore& store, const RunsQuery& query, bool matched) {
  for (const std::string& text : query.where) {
    if (text.find_first_not_of(' ') == std::string::npos) continue;
    const Condition c = parse_condition(text);
    if (run_columns().count(c.key) || (matched && (c.op != "!=" || c.key.find('/') != std::string::npos))) continue;
    if (const std::string why = unknown_key(store, c.key); !why.empty())
      throw BadRequest("filter '" + text + "': " + why);
  }
}

// A group-by key as SQL: a runs column, a tag (tag.NAME) or a setting; never a metric.
std::string group_sql(const std::string& key, std::vector<SqlValue>& params) {
  if (auto found = run_columns().find(key); found != run_columns().end()) return found->second;
  if (key.find('/') != std::string::npos)
    throw BadRequest("group '" + key + "': group by a setting, a tag or a runs column, not a metric");
  params.emplace_back(key.rfind("tag.", 0) == 0 ? key.substr(4) : key);
  return key.rfind("tag.", 0) == 0 ? "(SELECT t.value FROM tags t WHERE t.run_id = r.id AND t.key = ?)"
                                   : "(SELECT p.value FROM params p WHERE p.run_id = r.id AND p.key = ?)";
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
std::string runs_order(ResultsStore& store, const RunsQuery& query, std::vector<SqlValue>& params) {
  if (auto found = run_columns().find(query.sort); found != run_columns().end()) return found->second;
  if (query.sort.find('/') == std::string::npos)
    throw BadRequest("sort '" + query.sort +
                     "': expected id, experiment, variant, seed, status, started, duration "
                     "or a metric split/name" +
                     did_you_mean(query.sort, column_names()));
  const auto [split, name] = split_metric(query.sort);
  if (!metric_logged(store, query.sort))
    throw BadRequest("sort '" + query.sort + "': " + unknown_key(store, query.sort));
  params.emplace_back(split);
  params.emplace_back(name);
  return final_sql();
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

// Every run the filters select, grouped by `query.group`'s value: per group n and, per metric
// column, the n, mean and sd (n - 1) of the runs' final values. At most kGroups groups, by value.
constexpr size_t kGroups = 500;

std::string groups_json(ResultsStore& store, const RunsQuery& query, const std::string& where,
                        const std::vector<SqlValue>& where_params, const std::vector<std::string>& columns) {
  std::vector<SqlValue> params;
  std::string sql = "WITH f AS MATERIALIZED (SELECT r.id AS id, " + group_sql(query.group, params) +
                    " AS g FROM runs r JOIN experiments e ON e.id = r.experiment_id" + where +
                    ") SELECT coalesce(f.g, '(unset)')";
  params.insert(params.end(), where_params.begin(), where_params.end());
  for (const std::string& metric : columns) {
    const auto [split, name] = split_metric(metric);
    sql += ", " + final_text_sql();
    params.emplace_back(split);
    params.emplace_back(name);
  }
  std::map<std::string, std::vector<std::vector<double>>> groups;  // value → column → final values
  for (const auto& row : store.query(sql + " FROM f JOIN runs r ON r.id = f.id", params).rows) {
    auto& group = groups[row[0]];
    group.resize(columns.size() + 1);
    group[columns.size()].push_back(0);  // the run itself: n
    for (size_t i = 0; i < columns.size(); ++i)
      if (!row[i + 1].empty()) group[i].push_back(std::stod(row[i + 1]));
  }
  // Every selected run without the key (or none selected): a key no run in the file has is a misspelling.
  if (groups.size() <= 1 && run_columns().count(query.group) == 0 && (groups.empty() || groups.count("(unset)")))
    if (const std::string why = unknown_key(store, query.group); !why.empty())
      throw BadRequest("group '" + query.group + "': " + why);
  if (groups.size() > kGroups)
    throw BadRequest("group '" + query.group + "': " + std::to_string(groups.size()) + " values, more than " +
                     std::to_string(kGroups) + " groups");
  std::string out = ",\"group\":" + quote(query.group) + ",\"groups\":[";
  for (const auto& [value, group] : groups) {
    std::string stats = "{";
    for (size_t i = 0; i < columns.size(); ++i) {
      const auto& v = group[i];
      if (v.empty()) continue;
      double mean = 0, ss = 0;
      for (double x : v) mean += x / static_cast<double>(v.size());
      for (double x : v) ss += (x - mean) * (x - mean);
      const double sd = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : NAN;
      stats += (stats.size() > 1 ? "," : "") + quote(columns[i]) + ":[" + std::to_string(v.size()) + "," +
               number(mean) + "," + number(sd) + "]";
    }
    out += (out.back() == '[' ? "" : ",") + std::string("{\"value\":") + quote(value) +
           ",\"n\":" + std::to_string(group[columns.size()].size()) + ",\"stats\":" + stats + "}}";
  }
  return out + "]";
}

}  // namespace

std::string runs_json(ResultsStore& store, const RunsQuery& query) {
  std::vector<SqlValue> where_params, params;
  const std::string where = runs_filter(query, where_params);
  const std::string order = runs_order(store, query, params);
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
    select += ", " + final_text_sql();
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
  refuse_unknown_keys(store, query, total > 0);
  for (auto& row : runs.rows) row.erase(row.begin());

  // Shown: the asked-for metrics, or the task metrics any run of this page has.
  std::vector<bool> shown(columns.size(), !query.columns.empty());
  for (const auto& row : runs.rows)
    for (size_t i = 0; i < columns.size(); ++i) shown[i] = shown[i] || !row[10 + i].empty();
  for (size_t i = 0; i < query.columns.size(); ++i) {  // an asked-for column no run of the page has: is it real?
    const bool empty =
        std::all_of(runs.rows.begin(), runs.rows.end(), [i](const auto& r) { return r[10 + i].empty(); });
    if (empty && !metric_logged(store, columns[i]))
      throw BadRequest("column '" + columns[i] + "': " + unknown_key(store, columns[i]));
  }
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
         filter_names_json(store, samples) +
         (query.group.empty() ? "" : groups_json(store, query, where, where_params, columns)) + "}";
}

}  // namespace htm::serve
