// The JSON behind `htm serve`'s run and sweep pages, a run's series thinned for its charts, and a
// study's version (the runs table: serve_runs.cpp). Every value from the database leaves through page::quote or
// page::number, and every value from a request reaches SQL as a bound parameter, never as SQL text.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>

#include <boost/math/distributions/fisher_f.hpp>

#include "store/names.h"
#include "web/page_text.h"
#include "web/serve.h"
#include "web/serve_series.h"
#include "web/serve_sql.h"

namespace htm::serve {

using page::array;
using page::number;
using page::quote;

namespace {

// The indices of [lo, hi) a chart draws: all when they are at most `points` (or `points` is 0),
// else each of points/4 step buckets' first, least, greatest and last, in order.
void thin(const std::vector<int64_t>& steps, const std::vector<double>& ys, size_t lo, size_t hi, int64_t points,
          std::vector<size_t>& keep) {
  if (points <= 0 || hi - lo <= static_cast<size_t>(points)) {
    for (size_t i = lo; i < hi; ++i) keep.push_back(i);
    return;
  }
  const double buckets = static_cast<double>(std::max<int64_t>(1, points / 4));
  const double first = static_cast<double>(steps[lo]), span = static_cast<double>(steps[hi - 1]) - first + 1;
  const auto bucket = [&](size_t i) {
    return static_cast<int64_t>((static_cast<double>(steps[i]) - first) * buckets / span);
  };
  for (size_t i = lo; i < hi;) {
    const int64_t b = bucket(i);
    size_t least = i, most = i, j = i;
    for (; j < hi && bucket(j) == b; ++j) {
      if (ys[j] < ys[least]) least = j;
      if (ys[j] > ys[most]) most = j;
    }
    std::array<size_t, 4> four{i, least, most, j - 1};
    std::sort(four.begin(), four.end());
    for (size_t k = 0; k < 4; ++k)
      if (k == 0 || four[k] != four[k - 1]) keep.push_back(four[k]);
    i = j;
  }
}

void put(std::string& out, double v, bool fixed3 = false) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[40];
  const auto end = fixed3 ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 3).ptr
                          : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9).ptr;
  out.append(buf, end);
}

// "step", "value", "time", "epoch" of the points `keep`, their values from `ys`.
void columns(std::string& out, const Series& s, double started, const std::vector<double>& ys,
             const std::vector<size_t>& keep) {
  const auto column = [&](const char* name, auto&& each) {
    out += std::string(out.back() == '{' ? "" : ",") + "\"" + name + "\":[";
    for (size_t k = 0; k < keep.size(); ++k) {
      if (k) out += ',';
      each(keep[k]);
    }
    out += ']';
  };
  column("step", [&](size_t i) { out += std::to_string(s.step[i]); });
  column("value", [&](size_t i) { put(out, ys[i]); });
  column("time", [&](size_t i) { put(out, s.time[i] - started, true); });
  if (s.epochs)
    column("epoch", [&](size_t i) { put(out, s.epoch[i]); });
  else
    out += ",\"epoch\":null";
}

// The "series" array of series_json.
std::string series_array(const RunSeries& run, const SeriesQuery& q) {
  std::string out = "[";
  std::vector<size_t> keep;
  std::vector<double> smoothed;
  const double w = q.smooth > 0 && q.smooth < 1 ? q.smooth : 0;
  for (const Series& s : run.series) {
    const size_t n = s.step.size();
    const size_t a = std::lower_bound(s.step.begin(), s.step.end(), q.from) - s.step.begin();
    const size_t b = std::upper_bound(s.step.begin(), s.step.end(), q.to) - s.step.begin();
    const size_t lo = a > 0 ? a - 1 : a, hi = b < n ? b + 1 : b;  // one point either side
    const auto pick = [&](const std::vector<double>& ys) {
      keep.clear();
      if (lo < a) keep.push_back(lo);
      thin(s.step, ys, a, b, q.points, keep);
      if (hi > b) keep.push_back(b);
    };
    out += std::string(out.size() > 1 ? "," : "") + "{\"metric\":" + quote(s.metric) +
           ",\"total\":" + std::to_string(n) + ",\"n\":" + std::to_string(b - a);
    if (q.raw) {
      pick(s.value);
      columns(out, s, run.started, s.value, keep);
    }
    out += ",\"smooth\":";
    if (w == 0 || hi == 0) {
      out += "null}";
      continue;
    }
    smoothed.assign(hi, NAN);  // from the series' first point: the same average at any zoom
    double mean = 0, weight = 1;
    for (size_t i = 0; i < hi; ++i) {
      mean = mean * w + (1 - w) * s.value[i];
      weight *= w;
      smoothed[i] = mean / (1 - weight);
    }
    pick(smoothed);
    out += "{";
    columns(out, s, run.started, smoothed, keep);
    out += "}}";
  }
  return out + "]";
}

}  // namespace

std::string series_json(ResultsStore& store, int64_t run_id, const SeriesQuery& query) {
  const auto run = run_series(store, run_id);
  return "{\"series\":" + series_array(*run, query) + ",\"last\":" + std::to_string(run->last) + "}";
}

std::string run_json(ResultsStore& store, int64_t run_id, int64_t after, int64_t limit, const ArtifactTrust& trust,
                     const SeriesQuery* series) {
  const auto run = store.query(
      "SELECT r.id, e.name, coalesce(r.variant, ''), coalesce(r.seed, ''), r.status, "
      "printf('%.3f', r.started_at), printf('%.3f', coalesce(r.ended_at, r.heartbeat_at, r.started_at)), "
      "coalesce(r.error, ''), coalesce(r.git_revision, ''), coalesce(r.config_hash, ''), "
      "coalesce(r.uuid, ''), coalesce(r.artifact_dir, ''), "
      "coalesce((SELECT group_concat(t.key || '=' || t.value, ' ') FROM tags t WHERE t.run_id = r.id), '') "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.id = ?",
      {run_id});
  if (run.rows.empty()) throw NotFound("no run " + std::to_string(run_id) + " in this database");
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
  std::string thinned;
  if (series) {  // the series for the charts instead of the rows: no row listed
    const auto run_points = run_series(store, run_id);
    thinned = ",\"series\":" + series_array(*run_points, *series);
    after = std::max(after, run_points->last);
    limit = 0;
  }
  const auto metrics = store.query(
      "SELECT rowid, split || '/' || name, step, printf('%.9g', value), printf('%.3f', time), "
      "coalesce(epoch, '') FROM metrics "
      "WHERE run_id = ? AND rowid > ? AND value IS NOT NULL ORDER BY rowid LIMIT ?",
      {run_id, after, series ? int64_t{0} : limit + 1});
  const bool more = static_cast<int64_t>(metrics.rows.size()) > limit;
  std::string points = "[";
  int64_t last = after;
  for (size_t i = 0; i < metrics.rows.size() && static_cast<int64_t>(i) < limit; ++i) {
    const auto& m = metrics.rows[i];
    last = std::stoll(m[0]);
    points += (points.size() > 1 ? "," : "") + std::string("[") + m[0] + "," + quote(m[1]) + "," + m[2] + "," +
              number(std::stod(m[3])) + "," + m[4] + "," + (m[5].empty() ? "null" : m[5]) + "]";
  }
  points += "]";
  const auto artifacts = store.query(
      "SELECT kind, path, coalesce(step, '') FROM artifacts WHERE run_id = ? ORDER BY step, rowid", {run_id});
  // A folder htm may not read lists nothing: the route would refuse each file anyway. A listed name
  // is only a hint (lexically under the folder); the route checks the file itself.
  const ArtifactPath folder = trust.folder(run_id, r[11]);
  std::string pictures = "[";
  const std::filesystem::path dir = r[11];
  for (const auto& a : folder ? artifacts.rows : std::vector<std::vector<std::string>>{}) {
    const std::filesystem::path path = a[1];
    const std::string relative = path.lexically_relative(dir).generic_string();
    if (relative.empty() || relative.rfind("..", 0) == 0) continue;  // not under its own folder: not served
    pictures += (pictures.size() > 1 ? "," : "") + std::string("{\"kind\":") + quote(a[0]) +
                ",\"file\":" + quote(relative) + ",\"step\":" + (a[2].empty() ? "null" : a[2]) + "}";
  }
  pictures += "]";
  const bool refused = folder.verdict == ArtifactPath::Verdict::untrusted;
  return "{\"run\":" + record + ",\"params\":" + params + ",\"metrics\":" + points + thinned +
         ",\"last\":" + std::to_string(last) + ",\"more\":" + (more ? "true" : "false") + ",\"artifacts\":" + pictures +
         ",\"artifacts_refused\":" + (refused ? quote(folder.refusal + "; not served") : "null") + "}";
}

void require_study(ResultsStore& store, const std::string& experiment) {
  const std::string runs = "FROM runs r JOIN experiments e ON e.id = r.experiment_id";
  if (!store.query("SELECT 1 " + runs + " WHERE e.name = ? LIMIT 1", {experiment}).rows.empty()) return;
  std::vector<std::string> names;
  for (const auto& row : store.query("SELECT DISTINCT e.name " + runs).rows) names.push_back(row[0]);
  throw NotFound("no study '" + experiment + "' in this database" + did_you_mean(experiment, names));
}

std::string study_version(ResultsStore& store, const std::string& experiment) {
  const auto runs = store.query(
      "SELECT count(*), coalesce(sum(r.status = 'running'), 0), coalesce(group_concat(r.status, ''), ''), "
      "printf('%.3f', coalesce(max(r.ended_at), 0)) "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = ?",
      {experiment});
  const auto& row = runs.rows.at(0);
  if (row[0] == "0") require_study(store, experiment);
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
  require_study(store, experiment);
  if (phase != "explore" && phase != "confirm") throw BadRequest("phase '" + phase + "': expected explore or confirm");
  const auto [split, name] = split_metric(metric);
  const auto runs =
      store.query("SELECT r.id, coalesce(r.variant, ''), coalesce(r.seed, ''), " + final_text_sql() +
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
  if (ids.empty()) {
    std::vector<int64_t> study;  // a metric none of the study's runs logged is a misspelling
    for (const auto& row : runs.rows) study.push_back(std::stoll(row[0]));
    const auto logged = store.metric_names(study);
    throw BadRequest("no finished " + phase + " run of '" + experiment + "' logged " + metric +
                     (std::find(logged.begin(), logged.end(), metric) != logged.end()
                          ? std::string(" (the study's page lists what it logged)")
                          : did_you_mean(metric, logged)));
  }
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

ArtifactPath artifact_folder(ResultsStore& store, int64_t run_id, const ArtifactTrust& trust) {
  const auto found = store.query("SELECT coalesce(artifact_dir, '') FROM runs WHERE id = ?", {run_id});
  if (found.rows.empty())
    return {ArtifactPath::Verdict::absent, run_id, "", "no run " + std::to_string(run_id) + " in this database"};
  return trust.folder(run_id, found.rows[0][0]);
}

}  // namespace htm::serve
