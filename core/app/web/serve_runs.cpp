// The runs table of `htm serve` (/api/runs): filters, sort, page, settings as columns, runs grouped
// by a setting with each group's mean, sd and n of the shown metrics, and a chart's points. Every
// value from a request reaches SQL as a bound parameter, never as SQL text: the only text spliced
// in is chosen from fixed lists here.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "store/names.h"
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

bool parse_number(const std::string& text, double& value) {
  try {
    size_t used = 0;
    value = std::stod(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

// Whether a setting's TOML text `column` is a number (SQL): then compared and sorted as one.
std::string toml_number_sql(const std::string& column) {
  return "(" + column + " <> '' AND " + column + " NOT GLOB '*[^0-9.eE+-]*')";
}

double to_number(const Condition& c) {
  if (double v = 0; parse_number(c.value, v)) return v;
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
    return "EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.key = ? AND " +
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
  if (double number = 0; (c.op == "=" || c.op == "!=") && parse_number(c.value, number)) {
    // A number also matches its other spellings (10 matches 1e+01); != matches the runs without it.
    params.emplace_back(c.value);
    params.emplace_back(number);
    return std::string(c.op == "!=" ? "NOT " : "") +
           "EXISTS (SELECT 1 FROM params p WHERE p.run_id = r.id AND p.key = ? AND (p.value = ? OR (" +
           toml_number_sql("p.value") + " AND CAST(p.value AS REAL) = ?)))";
  }
  return compare("(SELECT p.value FROM params p WHERE p.run_id = r.id AND p.key = ?)", c, true, params);
}

// The names a filter or a group key may give besides settings: the runs columns.
std::vector<std::string> column_names() {
  std::vector<std::string> names;
  for (const auto& [name, sql] : run_columns()) names.push_back(name);
  return names;
}

// A run's tags as the runs table reads them (tag.NAME): those it recorded and those people gave it
// from the pages (run_user_tags), its own first where both name one key. A WITH clause's first
// table, `run_tags(run_id, key, value)`; a file without the annotation tables has its own alone.
std::string run_tags_sql(ResultsStore& store) {
  return store.has_annotations()
             ? "WITH run_tags(run_id, key, value) AS (SELECT run_id, key, value FROM tags UNION ALL "
               "SELECT u.run_id, u.key, u.value FROM run_user_tags u WHERE NOT EXISTS "
               "(SELECT 1 FROM tags o WHERE o.run_id = u.run_id AND o.key = u.key))"
             : "WITH run_tags(run_id, key, value) AS (SELECT run_id, key, value FROM tags)";
}

// Why `key` (a setting, tag.NAME or a metric split/name) names nothing any run has, or "" when a
// run has it. A setting is compared with every setting and the runs columns (varaint: variant).
std::string unknown_key(ResultsStore& store, const std::string& key) {
  if (key.rfind("tag.", 0) == 0) {
    const std::string with = run_tags_sql(store);
    if (!store.query(with + " SELECT 1 FROM run_tags WHERE key = ? LIMIT 1", {key.substr(4)}).rows.empty()) return "";
    std::vector<std::string> tags;
    for (const auto& row : store.query(with + " SELECT DISTINCT 'tag.' || key FROM run_tags").rows)
      tags.push_back(row[0]);
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

enum class Order { text, numbers_first };

// Run r's value of a setting (its TOML text) or a tag (tag.NAME) as SQL, the key appended to
// `params`; Order::numbers_first reads a number as one (a sort key: 8 < 16 < 128 < "a").
std::string attribute_sql(const std::string& key, std::vector<SqlValue>& params, Order order = Order::text) {
  const bool tag = key.rfind("tag.", 0) == 0;
  params.emplace_back(tag ? key.substr(4) : key);
  const std::string v = tag ? "t.value" : "p.value";
  const std::string value =
      order == Order::text ? v : "CASE WHEN " + toml_number_sql(v) + " THEN CAST(" + v + " AS REAL) ELSE " + v + " END";
  return "(SELECT " + value +
         (tag ? " FROM run_tags t WHERE t.run_id = r.id AND t.key = ?)"
              : " FROM params p WHERE p.run_id = r.id AND p.key = ?)");
}

// Any key of a run as SQL: a runs column, a final metric (split/name, 9 digits), tag.NAME or a setting.
std::string key_sql(const std::string& key, std::vector<SqlValue>& params) {
  if (auto found = run_columns().find(key); found != run_columns().end()) return found->second;
  if (key.find('/') == std::string::npos) return attribute_sql(key, params);
  const auto [split, name] = split_metric(key);
  params.emplace_back(split);
  params.emplace_back(name);
  return final_text_sql();
}

// A group-by key as SQL: a runs column, a tag (tag.NAME) or a setting; never a metric.
std::string group_sql(const std::string& key, std::vector<SqlValue>& params) {
  if (key.find('/') != std::string::npos)
    throw BadRequest("group '" + key + "': group by a setting, a tag or a runs column, not a metric");
  return key_sql(key, params);
}

// A setting's TOML text (or any text) as a JSON value: a number, true, false, a string without its
// TOML quotes, or else the text as a string (a list: "[1, 2]").
std::string typed_json(const std::string& text) {
  if (text == "true" || text == "false") return text;
  if (double v = 0; text.find_first_not_of("0123456789.eE+-") == std::string::npos && parse_number(text, v))
    return number(v);
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return quote(text);
  std::string plain;  // a TOML basic string's common escapes undone; any other kept as written
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    const char next = text[i] == '\\' && i + 2 < text.size() ? text[i + 1] : 0;
    const size_t escape = std::string("\"\\ntr").find(next);
    if (next == 0 || escape == std::string::npos) {
      plain += text[i];
      continue;
    }
    plain += "\"\\\n\t\r"[escape];
    ++i;
  }
  return quote(plain);
}

}  // namespace

namespace {

// The runs the table's filters select: a WITH clause the SQL begins with (run_tags), the filters
// (" WHERE 1 AND ...") and their values. Archived runs are left out unless asked for.
struct Selection {
  std::string with, where;
  std::vector<SqlValue> params;
};

Selection runs_filter(ResultsStore& store, const RunsQuery& query) {
  Selection selected{run_tags_sql(store), " WHERE 1", {}};
  std::string& where = selected.where;
  std::vector<SqlValue>& params = selected.params;
  if (!query.archived && store.has_annotations())
    where += " AND NOT EXISTS (SELECT 1 FROM run_archived a WHERE a.run_id = r.id AND a.archived = 1)";
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
  return selected;
}

// The runs table's sort key as SQL, a metric's split and name appended to `params`.
std::string runs_order(ResultsStore& store, const RunsQuery& query, std::vector<SqlValue>& params) {
  if (auto found = run_columns().find(query.sort); found != run_columns().end()) return found->second;
  if (query.sort.find('/') == std::string::npos) {  // a setting or a tag: one seek finds a real one
    if (const std::string why = unknown_key(store, query.sort); !why.empty())
      throw BadRequest("sort '" + query.sort + "': " + why);
    return attribute_sql(query.sort, params, Order::numbers_first);
  }
  const auto [split, name] = split_metric(query.sort);
  if (!metric_logged(store, query.sort))
    throw BadRequest("sort '" + query.sort + "': " + unknown_key(store, query.sort));
  params.emplace_back(split);
  params.emplace_back(name);
  return final_sql();
}

// A page's runs as JSON; row[10 + i] holds the final value of columns[i], given where shown[i],
// and row[10 + columns.size() + j] the TOML text of settings[j].
std::string runs_rows_json(const std::vector<std::vector<std::string>>& rows, const std::vector<std::string>& columns,
                           const std::vector<bool>& shown, const std::vector<std::string>& settings) {
  std::string out = "[";
  for (const auto& row : rows) {
    std::string values = "{", typed = "{";
    for (size_t i = 0; i < columns.size(); ++i)
      if (shown[i] && !row[10 + i].empty())
        values += (values.size() > 1 ? "," : "") + quote(columns[i]) + ":" + number(std::stod(row[10 + i]));
    for (size_t j = 0; j < settings.size(); ++j)
      if (const std::string& text = row[10 + columns.size() + j]; !text.empty())
        typed += (typed.size() > 1 ? "," : "") + quote(settings[j]) + ":" + typed_json(text);
    out += (out.size() > 1 ? "," : "") + std::string("{\"id\":") + row[0] + ",\"experiment\":" + quote(row[1]) +
           ",\"variant\":" + quote(row[2]) + ",\"seed\":" + (row[3].empty() ? "null" : row[3]) +
           ",\"status\":" + quote(row[4]) + ",\"started\":" + number(row[5].empty() ? NAN : std::stod(row[5])) +
           ",\"ended\":" + number(row[6].empty() ? NAN : std::stod(row[6])) + ",\"error\":" + quote(row[7]) +
           ",\"git\":" + quote(row[8]) + ",\"tags\":" + quote(row[9]) + ",\"final\":" + values +
           "},\"settings\":" + typed + "}}";
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

std::string groups_json(ResultsStore& store, const RunsQuery& query, const Selection& selected,
                        const std::vector<std::string>& columns) {
  std::vector<SqlValue> params;
  std::string sql = selected.with + ", f AS MATERIALIZED (SELECT r.id AS id, " + group_sql(query.group, params) +
                    " AS g FROM runs r JOIN experiments e ON e.id = r.experiment_id" + selected.where +
                    ") SELECT coalesce(f.g, '(unset)')";
  params.insert(params.end(), selected.params.begin(), selected.params.end());
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

// The custom chart's points: every run the filters select (the first kPoints by id), with its value
// of each of `keys` (a final metric, a setting, tag.NAME or a runs column), typed:
// ",\"chart\":{\"keys\":[...],\"runs\":[[id, value...]...]}". A key no run has is refused.
constexpr int64_t kPoints = 20000;

std::string chart_json(ResultsStore& store, const std::vector<std::string>& keys, const Selection& selected) {
  std::vector<SqlValue> params = selected.params;
  std::string sql = selected.with +
                    ", f AS MATERIALIZED (SELECT r.id AS id FROM runs r JOIN experiments e ON e.id = r.experiment_id" +
                    selected.where + " ORDER BY r.id LIMIT " + std::to_string(kPoints) + ") SELECT r.id";
  for (const std::string& key : keys) sql += ", " + key_sql(key, params);
  const auto rows =
      store.query(sql + " FROM f JOIN runs r ON r.id = f.id JOIN experiments e ON e.id = r.experiment_id", params).rows;
  for (size_t k = 0; k < keys.size(); ++k)
    if (std::all_of(rows.begin(), rows.end(), [k](const auto& row) { return row[k + 1].empty(); }) &&
        run_columns().count(keys[k]) == 0)
      if (const std::string why = unknown_key(store, keys[k]); !why.empty())
        throw BadRequest("chart '" + keys[k] + "': " + why);
  std::string out = ",\"chart\":{\"keys\":" + array(keys, quote) + ",\"runs\":[";
  for (const auto& row : rows) {
    out += (out.back() == '[' ? "[" : ",[") + row[0];
    for (size_t k = 0; k < keys.size(); ++k) out += "," + (row[k + 1].empty() ? "null" : typed_json(row[k + 1]));
    out += "]";
  }
  return out + "]}";
}

}  // namespace

std::string runs_json(ResultsStore& store, const RunsQuery& query) {
  std::vector<SqlValue> params;
  const Selection selected = runs_filter(store, query);
  const std::string order = runs_order(store, query, params);
  const std::string from = " FROM runs r JOIN experiments e ON e.id = r.experiment_id";
  params.insert(params.end(), selected.params.begin(), selected.params.end());
  // The filters and the sort key are computed once per run (f), the count and the page (p) from
  // them, and the shown columns only for the page's runs.
  const int64_t size = std::clamp<int64_t>(query.size, 1, 500), page = std::max<int64_t>(query.page, 0);
  const std::string direction = query.descending ? " DESC" : " ASC";
  std::string select =
      selected.with + ", f AS MATERIALIZED (SELECT r.id AS id, " + order + " AS sort_key" + from + selected.where +
      "), p AS (SELECT id, sort_key FROM f ORDER BY sort_key" + direction + " NULLS LAST, id DESC LIMIT " +
      std::to_string(size) + " OFFSET " + std::to_string(page * size) +
      ") SELECT (SELECT count(*) FROM f), r.id, e.name, coalesce(r.variant, ''), r.seed, r.status, "
      "printf('%.3f', r.started_at), printf('%.3f', coalesce(r.ended_at, r.heartbeat_at, r.started_at)), "
      "coalesce(r.error, ''), coalesce(r.git_revision, ''), "
      "coalesce((SELECT group_concat(t.key || '=' || t.value, ' ') FROM run_tags t WHERE t.run_id = r.id), '')";
  // The columns asked for: final metrics (split/name), and settings or tags (anything else).
  std::vector<std::string> metrics, settings;
  for (const std::string& key : query.columns)
    if (key.find('/') != std::string::npos)
      metrics.push_back(key);
    else if (run_columns().count(key) == 0 && std::count(settings.begin(), settings.end(), key) == 0)
      settings.push_back(key);  // a runs column is shown anyway
  const std::vector<std::string>& columns = metrics.empty() ? kTaskMetrics : metrics;
  for (const std::string& metric : columns) {
    const auto [split, name] = split_metric(metric);
    select += ", " + final_text_sql();
    params.emplace_back(split);
    params.emplace_back(name);
  }
  for (const std::string& key : settings) select += ", " + attribute_sql(key, params);
  const std::string sql = select + " FROM p JOIN runs r ON r.id = p.id JOIN experiments e ON e.id = r.experiment_id" +
                          " ORDER BY p.sort_key" + direction + " NULLS LAST, r.id DESC";
  auto runs = store.query(sql, params);
  int64_t total = 0;
  if (!runs.rows.empty())
    total = std::stoll(runs.rows.front().front());
  else if (page > 0)  // past the last page: the count alone
    total = std::stoll(
        store.query(selected.with + " SELECT count(*)" + from + selected.where, selected.params).rows.at(0).at(0));
  refuse_unknown_keys(store, query, total > 0);
  for (auto& row : runs.rows) row.erase(row.begin());

  // Shown: the asked-for metrics, or the task metrics any run of this page has.
  std::vector<bool> shown(columns.size(), !metrics.empty());
  for (const auto& row : runs.rows)
    for (size_t i = 0; i < columns.size(); ++i) shown[i] = shown[i] || !row[10 + i].empty();
  const size_t asked = metrics.empty() ? 0 : metrics.size();
  for (size_t i = 0; i < asked + settings.size(); ++i) {  // an asked-for column no run of the page has: is it real?
    const size_t at = i < asked ? 10 + i : 10 + columns.size() + i - asked;
    const std::string& key = i < asked ? columns[i] : settings[i - asked];
    if (std::all_of(runs.rows.begin(), runs.rows.end(), [at](const auto& r) { return r[at].empty(); }))
      if (const std::string why = unknown_key(store, key); !why.empty())
        throw BadRequest("column '" + key + "': " + why);
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
         ",\"setting_columns\":" + array(settings, quote) +
         ",\"runs\":" + runs_rows_json(runs.rows, columns, shown, settings) +
         ",\"experiments\":" + rows_json(experiments) + filter_names_json(store, samples) +
         (query.group.empty() ? "" : groups_json(store, query, selected, columns)) +
         (query.chart.empty() ? "" : chart_json(store, query.chart, selected)) + "}";
}

}  // namespace htm::serve
