#include "web/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

#include "config/settings.h"
#include "config/toml_tree.h"
#include "htm/error.h"
#include "htm/value.h"
#include "study/comparison.h"
#include "web/page_text.h"

namespace htm {
namespace {

using page::array;
using page::number;
using page::numbers;
using page::quote;

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += {table[v >> 18], table[(v >> 12) & 63], table[(v >> 6) & 63], table[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += {table[v >> 18], table[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += {table[v >> 18], table[(v >> 12) & 63], table[(v >> 6) & 63], '='};
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Run {
  int64_t id, seed;
  std::string variant, status, error, git, artifacts, tags;
  double started, ended;
};

std::string in_list(const std::vector<Run>& runs) {
  std::string ids;
  for (const Run& r : runs) ids += (ids.empty() ? "" : ",") + std::to_string(r.id);
  return "(" + ids + ")";
}

// What differs between the variants: each variant's first run's flattened config, and only the
// keys whose values are not all equal ([experiment] and [runtime] never change a result).
std::string differing_settings(ResultsStore& store, const std::vector<Run>& runs,
                               const std::vector<std::string>& variants) {
  std::map<std::string, std::map<std::string, std::string>> by_key;  // key → variant → value
  std::set<int64_t> first;
  for (const std::string& v : variants)
    for (const Run& r : runs)
      if (r.variant == v) {
        first.insert(r.id);
        break;
      }
  const auto rows = store.query(
      "SELECT r.variant, p.key, p.value FROM params p JOIN runs r ON r.id = p.run_id "
      "WHERE p.run_id IN " +
      in_list(runs));
  for (const auto& row : rows.rows) {
    if (row[1].rfind("experiment.", 0) == 0 || row[1].rfind("runtime.", 0) == 0) continue;
    by_key[row[1]].emplace(row[0], row[2]);  // the variant's first value stays
  }
  std::string keys = "[", values = "[";
  size_t same = 0;
  for (const auto& [key, per_variant] : by_key) {
    std::set<std::string> distinct;
    std::vector<std::string> line;
    for (const std::string& v : variants) {
      auto found = per_variant.find(v);
      line.push_back(found == per_variant.end() ? "(unset)" : found->second);
      distinct.insert(line.back());
    }
    if (distinct.size() < 2) {
      ++same;
      continue;
    }
    keys += (keys.size() > 1 ? "," : "") + quote(key);
    values += (values.size() > 1 ? "," : "") + array(line, quote);
  }
  return "{\"keys\":" + keys + "],\"values\":" + values + "],\"same\":" + std::to_string(same) + "}";
}

// Every metric against step: per variant, the mean over runs with the min and max, at most
// kPoints steps (evenly thinned) so that a long run's page stays small, and at each step the mean
// wall time since the runs started (s) and the epoch (where logged): the charts' other x axes.
// Drawn values keep 5 digits (a curve is read by eye, 230 px high; the final values keep all).
constexpr size_t kPoints = 400;

std::string short_numbers(const std::vector<double>& values) {
  return array(values, [](double v) {
    if (!std::isfinite(v)) return std::string("null");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.5g", v);
    return std::string(buf);
  });
}

// The metrics a study page draws first, in the "Curves" panel: the loss and the task's scores.
bool main_metric(const std::string& m) {
  if (m == "train/loss" || m == "train/epoch_loss" || m == "test/mse" || m == "test/accuracy") return true;
  const std::string name = m.rfind("test/", 0) == 0 ? m.substr(5) : "";
  return name.size() >= 2 && name.find('/') == std::string::npos && name.compare(name.size() - 2, 2, "f1") == 0;
}

// A reference drawn across a main metric's chart (dashed): the baselines, the random floor, the
// agglomerative ceiling (report.js's referencesOf pairs them).
bool reference_metric(const std::string& m) {
  for (const char* part : {"/baseline/", "/random/", "/agglomerative/"})
    if (m.find(part) != std::string::npos) return true;
  return m.size() >= 12 && m.compare(m.size() - 12, 12, "baseline_mse") == 0;
}

// Read in full on a study page's first load: the main metrics and the references drawn on them
// (the others are named, and read once the page asks).
bool first_drawn(const std::string& m) { return main_metric(m) || reference_metric(m); }

// Every metric the runs logged, as split/name, sorted.
std::vector<std::string> logged_metrics(ResultsStore& store, const std::vector<Run>& runs) {
  std::vector<int64_t> ids;
  for (const Run& r : runs) ids.push_back(r.id);
  return store.metric_names(ids);
}

struct Point {  // one logged value of a metric
  int64_t step, run, rowid;
  double value, time;  // time: seconds since its run started
  int64_t epoch;       // -1: none logged
};
using Points = std::map<std::string, std::vector<std::vector<Point>>>;  // metric → variant → its points

// The points `part` asks for. Read typed and unsorted: the index hands a run's rows over metric
// by metric, so the metric's text is compared, not copied, on most rows. One read per split, as
// split = ? AND name IN (...), so that the index seeks each series (a list of (split, name)
// pairs, or an OR of splits, would read every row of each run).
Points read_points(ResultsStore& store, const std::vector<Run>& runs, const std::vector<std::string>& variants,
                   ReportCurves part, const std::vector<std::string>& logged) {
  std::map<int64_t, size_t> variant_of;  // run → its variant's position
  std::map<int64_t, double> started;     // run → when it started
  for (const Run& r : runs) {
    variant_of[r.id] = static_cast<size_t>(std::find(variants.begin(), variants.end(), r.variant) - variants.begin());
    started[r.id] = r.started;
  }
  std::map<std::string, std::vector<std::string>> wanted;  // split → names
  for (const std::string& m : logged)
    if (part != ReportCurves::all && first_drawn(m) == (part == ReportCurves::main))
      wanted[m.substr(0, m.find('/'))].push_back(m.substr(m.find('/') + 1));
  std::vector<std::pair<std::string, std::vector<SqlValue>>> reads;  // a condition, its values
  if (part == ReportCurves::all) reads.push_back({"", {}});
  for (const auto& [split, names] : wanted) {
    std::vector<SqlValue> params{split};
    std::string in;
    for (const std::string& name : names) in += in.empty() ? "?" : ", ?", params.push_back(name);
    reads.push_back({" AND split = ? AND name IN (" + in + ")", params});
  }
  Points data;
  std::vector<std::vector<Point>>* current = nullptr;
  std::string current_metric;
  for (const auto& [condition, params] : reads)
    store.scan(
        "SELECT run_id, split || '/' || name, step, value, rowid, time, coalesce(epoch, -1) FROM metrics "
        "WHERE run_id IN " +
            in_list(runs) + " AND value IS NOT NULL" + condition,
        params, [&](const Row& row) {
          if (current == nullptr || row.view(1) != current_metric) {
            current_metric = row.text(1);
            current = &data[current_metric];
            current->resize(variants.size());
          }
          const int64_t run = row.integer(0);
          (*current)[variant_of[run]].push_back(
              {row.integer(2), run, row.integer(4), row.real(3), row.real(5) - started[run], row.integer(6)});
        });
  return data;
}

// One variant's series of a metric: per step, the mean, min and max over runs of each run's last
// value logged at that step, at most kPoints steps (evenly thinned, the last always kept). Widens
// [*lo_all, *hi_all] to its values and sets *epochs where an epoch was logged.
std::string variant_series(std::vector<Point>& points, const std::string& variant, double* lo_all, double* hi_all,
                           bool* epochs) {
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return std::tie(a.step, a.run, a.rowid) < std::tie(b.step, b.run, b.rowid);
  });
  std::vector<double> step_all, mean_all, lo_v, hi_v, time_all, epoch_all;
  for (size_t i = 0; i < points.size();) {
    double sum = 0, mn = INFINITY, mx = -INFINITY, time = 0;
    int64_t epoch = -1;
    size_t n = 0, j = i;
    for (; j < points.size() && points[j].step == points[i].step; ++j) {
      if (j + 1 < points.size() && points[j + 1].step == points[j].step && points[j + 1].run == points[j].run)
        continue;  // a later value of this run at this step replaces it
      sum += points[j].value, mn = std::min(mn, points[j].value), mx = std::max(mx, points[j].value), ++n;
      time += points[j].time, epoch = std::max(epoch, points[j].epoch);
    }
    step_all.push_back(static_cast<double>(points[i].step));
    mean_all.push_back(sum / static_cast<double>(n));
    lo_v.push_back(mn);
    hi_v.push_back(mx);
    time_all.push_back(time / static_cast<double>(n));
    epoch_all.push_back(epoch < 0 ? NAN : static_cast<double>(epoch));
    *epochs = *epochs || epoch >= 0;
    i = j;
  }
  std::vector<double> steps, mean, lo, hi, time, epoch;
  const size_t count = step_all.size(), stride = std::max<size_t>(1, (count + kPoints - 1) / kPoints);
  for (size_t k = 0; k < count; ++k) {
    if (k % stride != 0 && k + 1 != count) continue;
    steps.push_back(step_all[k]);
    mean.push_back(mean_all[k]);
    lo.push_back(lo_v[k]);
    hi.push_back(hi_v[k]);
    time.push_back(time_all[k]);
    epoch.push_back(epoch_all[k]);
    *lo_all = std::min(*lo_all, lo_v[k]);
    *hi_all = std::max(*hi_all, hi_v[k]);
  }
  return std::string("{\"variant\":") + quote(variant) + ",\"step\":" + numbers(steps) +
         ",\"mean\":" + short_numbers(mean) + ",\"lo\":" + short_numbers(lo) + ",\"hi\":" + short_numbers(hi) +
         ",\"time\":" + short_numbers(time) + (*epochs ? ",\"epoch\":" + numbers(epoch) : std::string()) + "}";
}

std::string curves(ResultsStore& store, const std::vector<Run>& runs, const std::vector<std::string>& variants,
                   ReportCurves part, const std::vector<std::string>& logged) {
  Points data = read_points(store, runs, variants, part, logged);
  std::map<std::string, std::string> out;  // metric → its JSON, in the metrics' order
  for (auto& [metric, per_variant] : data) {
    std::string series = "[";
    double lo_all = INFINITY, hi_all = -INFINITY;
    bool epochs = false;
    for (size_t v = 0; v < variants.size(); ++v)
      if (!per_variant[v].empty())
        series +=
            (series.size() > 1 ? "," : "") + variant_series(per_variant[v], variants[v], &lo_all, &hi_all, &epochs);
    // A metric spanning decades (both ends positive, a ratio over 100) is offered on a log scale.
    const bool decades = lo_all > 0 && hi_all / lo_all > 100;
    out[metric] = "{\"metric\":" + quote(metric) + ",\"main\":" + (main_metric(metric) ? "true" : "false") +
                  ",\"log\":" + (decades ? "true" : "false") + ",\"series\":" + series + "]}";
  }
  if (part == ReportCurves::main)  // the others by name: the page asks for them once these are drawn
    for (const std::string& m : logged)
      if (!first_drawn(m)) out[m] = "{\"metric\":" + quote(m) + ",\"deferred\":true}";
  std::string json = "[";
  for (const auto& [metric, text] : out) json += (json.size() > 1 ? "," : "") + text;
  return json + "]";
}

// The final-values panel: `htm compare`'s numbers for each chosen metric, phase by phase.
std::string finals(ResultsStore& store, ReportRequest& request, const std::vector<std::string>& metrics,
                   std::string* warnings) {
  CompareRequest compare;
  compare.experiment = request.experiment;
  compare.metrics = metrics;
  compare.reference = request.reference;
  compare.adjustment = request.adjustment;
  compare.targets = request.targets;
  compare.collapse = request.collapse;
  Comparison c;
  try {
    c = compare_study(store, compare);
  } catch (const Error& e) {  // no finished run has any of the metrics: an explicit "no data" panel each
    *warnings = "[]";
    return array(metrics, [&](const std::string& m) {
      return "{\"metric\":" + quote(m) + ",\"missing\":" + quote(e.what()) + "}";
    });
  }
  request.reference = c.reference;
  *warnings = array(c.warnings, quote);
  const auto row_json = [](const CompareRow& r) {
    return "{\"variant\":" + quote(r.variant) + ",\"n\":" + std::to_string(r.values.size()) +
           ",\"mean\":" + number(r.mean) + ",\"sd\":" + number(r.sd) +
           ",\"reference\":" + (r.reference ? "true" : "false") + ",\"tested\":" + (r.tested ? "true" : "false") +
           ",\"test\":" + quote(r.tested ? stats::test_name(r.test.kind) : "") + ",\"diff\":" + number(r.test.diff) +
           ",\"ci_low\":" + number(r.test.ci_low) + ",\"ci_high\":" + number(r.test.ci_high) +
           ",\"p\":" + number(r.test.p) + ",\"p_adjusted\":" + number(r.p_adjusted) +
           ",\"effect\":" + number(r.effect.percent) + ",\"effect_low\":" + number(r.effect.ci_low) +
           ",\"effect_high\":" + number(r.effect.ci_high) +
           ",\"bound\":" + number(r.has_target ? r.target.bound : NAN) +
           ",\"met\":" + (r.has_target && r.target.met ? "true" : "false") +
           ",\"collapsed\":" + std::to_string(r.collapsed) +
           ",\"seeds\":" + array(r.seeds, [](int64_t s) { return std::to_string(s); }) +
           ",\"values\":" + numbers(r.values) + "}";
  };
  return array(c.metrics, [&](const MetricTable& t) {
    std::string out = "{\"metric\":" + quote(t.metric) + ",\"reference\":" + quote(c.reference) +
                      ",\"adjust\":" + quote(stats::adjustment_name(c.adjustment));
    if (t.has_target)
      out += ",\"target\":{\"text\":" + quote(t.target.text) +
             ",\"at_least\":" + (t.target.at_least ? "true" : "false") +
             ",\"threshold\":" + number(t.target.threshold) + "}";
    if (!t.missing.empty()) return out + ",\"missing\":" + quote(t.missing) + "}";  // an explicit "no data" panel
    return out + ",\"phases\":" +
           array(t.phases,
                 [&](const PhaseTable& p) {
                   return "{\"phase\":" + quote(p.phase) + ",\"family\":" + std::to_string(p.family) +
                          ",\"has_reference\":" + (p.has_reference ? "true" : "false") +
                          ",\"rows\":" + array(p.rows, row_json) + "}";
                 }) +
           "}";
  });
}

// The latest picture of each kind of each variant's runs (finished ones first, at most
// kSeedsShown of them), embedded as data URIs in a file (htm report), else by the address of
// htm serve's artifact route: the page offers a seed picker per variant and loads them lazily.
// Only files inside a run folder ArtifactTrust accepts are read or linked; a picture of a folder
// it refuses carries why ("refused"), one elsewhere or gone none ("missing file" on the page).
constexpr size_t kSeedsShown = 5;

std::string pictures(ResultsStore& store, const std::vector<Run>& runs, const std::vector<std::string>& variants,
                     const ReportRequest& request) {
  const ArtifactTrust trust(request.artifact_roots);
  const bool inline_pictures = request.inline_pictures;
  std::string out = "[";
  for (const std::string& variant : variants) {
    std::vector<const Run*> shown;
    for (int pass = 0; pass < 2; ++pass)
      for (const Run& r : runs)
        if (r.variant == variant && (r.status == "finished") == (pass == 0) && shown.size() < kSeedsShown)
          shown.push_back(&r);
    for (const Run* run : shown) {
      const ArtifactPath folder = trust.folder(run->id, run->artifacts);
      const std::string refused =
          folder.verdict == ArtifactPath::Verdict::untrusted ? folder.refusal + "; not read" : "";
      const auto rows = store.query(
          "SELECT kind, path, coalesce(step, 0) FROM artifacts WHERE run_id = ? AND path LIKE '%.png' "
          "ORDER BY step, rowid",
          {run->id});
      // htm serve lists each step's pictures, by address; a file keeps the latest of each kind.
      std::vector<std::vector<std::string>> shown = rows.rows;  // kind, path, step; by step
      if (inline_pictures) {
        std::map<std::string, std::vector<std::string>> latest;
        for (const auto& row : rows.rows) latest[row[0]] = row;
        shown.clear();
        for (const auto& [kind, row] : latest) shown.push_back(row);
      }
      for (const auto& row : shown) {
        const std::string &kind = row[0], &path = row[1], &step = row[2];
        std::string picture = "{\"variant\":" + quote(variant) + ",\"seed\":" + std::to_string(run->seed) +
                              ",\"run\":" + std::to_string(run->id) + ",\"kind\":" + quote(kind) + ",\"step\":" + step +
                              ",\"path\":" + quote(path);
        const ArtifactPath file = ArtifactTrust::recorded_file(folder, path);  // else no src: "missing file"
        const std::string relative =
            file ? std::filesystem::path(file.path).lexically_relative(folder.path).generic_string() : "";
        if (file && !inline_pictures)  // htm serve's route
          picture += ",\"src\":" + quote("/artifact/" + std::to_string(run->id) + "/" + relative);
        else if (file)
          picture += ",\"src\":" + quote("data:image/png;base64," + base64(read_file(file.path)));
        else if (!refused.empty())
          picture += ",\"refused\":" + quote(refused);
        out += (out.size() > 1 ? "," : "") + picture + "}";
      }
    }
  }
  return out + "]";
}

}  // namespace

std::string report_data(ResultsStore& store, ReportRequest& request) {
  const auto rows = store.query(
      "SELECT r.id, r.variant, r.seed, r.status, coalesce(r.error, ''), coalesce(r.git_revision, ''), "
      "coalesce(r.artifact_dir, ''), printf('%.3f', r.started_at), "  // query() cells keep 6 digits: times need more
      "printf('%.3f', coalesce(r.ended_at, r.heartbeat_at, r.started_at)), "
      "coalesce((SELECT group_concat(key || '=' || value, ' ') FROM tags t WHERE t.run_id = r.id), '') "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = ? ORDER BY r.id",
      {request.experiment});
  if (rows.rows.empty())
    throw Error("no runs of experiment '" + request.experiment + "' in " + store.path() +
                " (`htm runs` lists what is there)");
  std::vector<Run> runs;
  std::vector<std::string> variants;
  for (const auto& r : rows.rows) {
    runs.push_back(
        {std::stoll(r[0]), std::stoll(r[2]), r[1], r[3], r[4], r[5], r[6], r[9], std::stod(r[7]), std::stod(r[8])});
    if (std::find(variants.begin(), variants.end(), r[1]) == variants.end()) variants.push_back(r[1]);
  }
  std::vector<std::string> metrics = request.metrics;
  const std::vector<std::string> logged =
      metrics.empty() || request.curves != ReportCurves::all ? logged_metrics(store, runs) : std::vector<std::string>{};
  if (request.curves == ReportCurves::rest)
    return "{\"experiment\":" + quote(request.experiment) +
           ",\"curves\":" + curves(store, runs, variants, request.curves, logged) + "}";
  if (metrics.empty()) {  // the task's own: whichever of these the runs logged
    for (const char* m : {"test/mse", "test/accuracy", "test/cluster_f1", "test/sibling_f1"})
      if (std::binary_search(logged.begin(), logged.end(), m)) metrics.push_back(m);
    if (metrics.empty()) metrics.push_back("test/mse");
  }
  for (const std::string& m : metrics)
    if (m.find('/') == std::string::npos) throw Error("--metric " + m + ": expected split/name, e.g. test/mse");
  std::string description;
  const auto described =
      store.query("SELECT value FROM params WHERE run_id = ? AND key = 'experiment.description'", {runs.front().id});
  if (!described.rows.empty()) {  // params hold TOML text: read it as --set would
    const config::Node node = config::parse_override("description=" + described.rows[0][0]);
    if (const auto* text = std::get_if<std::string>(&*node.find("description")->value)) description = *text;
  }
  std::string warnings;
  const std::string finals_json = finals(store, request, metrics, &warnings);
  if (request.finals_only)
    return "{\"experiment\":" + quote(request.experiment) + ",\"finals\":" + finals_json + ",\"warnings\":" + warnings +
           "}";
  const auto plugins = store.query(
      "SELECT DISTINCT kind, name, coalesce(version, ''), coalesce(sha256, '') "
      "FROM run_plugins WHERE run_id IN " +
      in_list(runs) + " ORDER BY kind, name");
  return "{\"experiment\":" + quote(request.experiment) + ",\"description\":" + quote(description) +
         ",\"database\":" + quote(store.path()) + ",\"variants\":" + array(variants, quote) + ",\"runs\":" +
         array(runs,
               [](const Run& r) {
                 return "{\"id\":" + std::to_string(r.id) + ",\"variant\":" + quote(r.variant) +
                        ",\"seed\":" + std::to_string(r.seed) + ",\"status\":" + quote(r.status) +
                        ",\"error\":" + quote(r.error) + ",\"git\":" + quote(r.git) + ",\"tags\":" + quote(r.tags) +
                        ",\"started\":" + number(r.started) + ",\"ended\":" + number(r.ended) + "}";
               }) +
         ",\"plugins\":" + array(plugins.rows, [](const std::vector<std::string>& p) { return array(p, quote); }) +
         ",\"differs\":" + differing_settings(store, runs, variants) +
         ",\"curves\":" + curves(store, runs, variants, request.curves, logged) + ",\"finals\":" + finals_json +
         ",\"warnings\":" + warnings + ",\"pictures\":" + pictures(store, runs, variants, request) + "}";
}

}  // namespace htm
