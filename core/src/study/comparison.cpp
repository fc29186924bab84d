#include "study/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "config/settings.h"
#include "htm/error.h"
#include "store/results_store.h"
#include "study/seed_ledger.h"

namespace htm {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Sample {  // one seed's latest finished run
  int64_t run = 0, seed = 0;
  double value = 0;
  std::string hash;
};
// phase → variant → seed → sample, and the variants in first-run order.
struct Samples {
  std::map<std::string, std::map<std::string, std::map<int64_t, Sample>>> by_phase;
  std::vector<std::string> order;
};

Samples load(ResultsStore& store, const CompareRequest& request, const std::string& metric) {
  const size_t slash = metric.find('/');
  std::string sql =
      "SELECT r.variant, printf('%!.17g', m.value), r.config_hash, r.seed, r.id, "
      "coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), '') "
      "FROM runs r JOIN experiments e ON e.id = r.experiment_id "
      "JOIN metrics m ON m.rowid = " +
      latest_metric_sql("l.rowid", "r.id") +
      " "
      "WHERE e.name = ? AND r.status = 'finished' AND m.value IS NOT NULL";
  std::vector<SqlValue> params = {metric.substr(0, slash), metric.substr(slash + 1), request.experiment};
  if (!request.filter.hash.empty()) {
    sql += " AND substr(r.config_hash, 1, length(?)) = ?";
    params.insert(params.end(), {request.filter.hash, request.filter.hash});
  }
  if (!request.filter.revision.empty()) {
    sql += " AND substr(coalesce(r.git_revision, ''), 1, length(?)) = ?";
    params.insert(params.end(), {request.filter.revision, request.filter.revision});
  }
  if (request.filter.first_seed != INT64_MIN) {
    sql += " AND r.seed BETWEEN ? AND ?";
    params.insert(params.end(), {request.filter.first_seed, request.filter.last_seed});
  }
  for (const auto& [key, value] : request.filter.tags) {
    sql += " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = ? AND t.value = ?)";
    params.insert(params.end(), {key, value});
  }
  Samples out;
  // A seed run again (--force, say under a new tag) is one sample, not two: its latest run counts.
  for (const auto& row : store.query(sql + " ORDER BY r.id", params).rows) {
    if (std::find(out.order.begin(), out.order.end(), row[0]) == out.order.end()) out.order.push_back(row[0]);
    const std::string phase = row[5] == "confirm" ? "confirm" : "explore";
    const int64_t seed = std::stoll(row[3]);
    out.by_phase[phase][row[0]][seed] = {std::stoll(row[4]), seed, std::stod(row[1]), row[2]};
  }
  return out;
}

// Runs whose last value lies more than `drop` below the best value they logged.
int count_collapsed(ResultsStore& store, const std::string& metric, const std::map<int64_t, Sample>& samples,
                    double drop) {
  const size_t slash = metric.find('/');
  int collapsed = 0;
  for (const auto& [seed, s] : samples) {
    const auto peak = store.query(
        "SELECT CASE WHEN max(value) IS NULL THEN NULL ELSE printf('%!.17g', max(value)) END FROM metrics "
        "WHERE run_id = ? AND split = ? AND name = ?",
        {s.run, metric.substr(0, slash), metric.substr(slash + 1)});
    if (!peak.rows.empty() && !peak.rows[0][0].empty() && s.value < std::stod(peak.rows[0][0]) - drop) ++collapsed;
  }
  return collapsed;
}

CompareRow describe_row(const std::string& variant, const std::map<int64_t, Sample>& samples) {
  CompareRow row;
  row.variant = variant;
  std::set<std::string> hashes;
  for (const auto& [seed, s] : samples) {
    row.seeds.push_back(seed);
    row.values.push_back(s.value);
    hashes.insert(s.hash);
  }
  row.hashes.assign(hashes.begin(), hashes.end());
  row.configs = hashes.size();
  row.mean = stats::mean(row.values);
  row.sd = stats::sd(row.values);
  row.test.p = row.p_adjusted = kNaN;
  row.effect = {kNaN, kNaN, kNaN};
  return row;
}

// Paired by seed when both sides ran exactly the same seeds, Welch's test otherwise.
void test_against(CompareRow& row, const CompareRow& ref) {
  row.tested = true;
  if (row.seeds == ref.seeds && row.seeds.size() >= 2) {
    row.test = stats::paired_test(row.values, ref.values);
  } else {
    row.test = stats::welch_test(row.values, ref.values);
  }
  row.effect = stats::percent_effect(row.values, ref.values, row.test);
}

}  // namespace

std::string qualified_metric(const std::string& metric, const std::string& split) {
  for (const char* known : {"test/", "train/"})
    if (metric.rfind(known, 0) == 0) return metric;
  return split + "/" + metric;
}

std::string seed_list(std::vector<int64_t> seeds) {
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  if (seeds.empty()) return "";
  if (seeds.size() > 2 && seeds.back() - seeds.front() + 1 == static_cast<int64_t>(seeds.size()))
    return std::to_string(seeds.front()) + "-" + std::to_string(seeds.back());
  std::string out;
  for (int64_t s : seeds) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

namespace {

// One metric's table: per phase, a row per variant tested against the reference's row.
MetricTable metric_table(ResultsStore& store, const CompareRequest& request, const std::string& metric,
                         const Samples& samples) {
  MetricTable table;
  table.metric = metric;
  for (const auto& target : request.targets)
    if (target.metric == table.metric) table.has_target = true, table.target = target;
  for (const auto& margin : request.margins)
    if (margin.metric == table.metric) table.has_margin = true, table.margin = margin;
  if (samples.order.empty()) {
    table.missing = "no finished run of experiment '" + request.experiment + "' has a " +
                    table.metric.substr(0, table.metric.find('/')) + " metric '" +
                    table.metric.substr(table.metric.find('/') + 1) + "'";
  }
  for (const char* phase : kPhases) {
    auto found = samples.by_phase.find(phase);
    if (found == samples.by_phase.end()) continue;
    PhaseTable pt;
    pt.phase = phase;
    const auto ref = found->second.find(request.reference);
    pt.has_reference = ref != found->second.end();
    const CompareRow ref_row = pt.has_reference ? describe_row(request.reference, ref->second) : CompareRow{};
    for (const auto& variant : samples.order) {
      auto runs = found->second.find(variant);
      if (runs == found->second.end()) continue;
      CompareRow row = describe_row(variant, runs->second);
      row.reference = variant == request.reference;
      if (pt.has_reference && !row.reference) test_against(row, ref_row);
      if (table.has_margin && row.tested)
        row.has_margin = true, row.margin = stats::check_margin(row.test, ref_row.mean, table.margin);
      if (table.has_target) row.has_target = true, row.target = stats::check_target(row.values, table.target);
      if (request.collapse > 0) row.collapsed = count_collapsed(store, table.metric, runs->second, request.collapse);
      pt.rows.push_back(std::move(row));
    }
    table.phases.push_back(std::move(pt));
  }
  return table;
}

// One family per phase: every comparison of every metric in it, adjusted together; the margin
// claims of a phase are a second family.
void adjust_families(Comparison& out) {
  for (const char* phase : kPhases) {
    std::vector<CompareRow*> family, margins;
    for (auto& table : out.metrics)
      for (auto& pt : table.phases)
        if (pt.phase == phase)
          for (auto& row : pt.rows) {
            if (row.tested) family.push_back(&row);
            if (row.has_margin) margins.push_back(&row);
          }
    std::vector<double> p, q;
    for (const CompareRow* row : family) p.push_back(row->test.p);
    for (const CompareRow* row : margins) q.push_back(row->margin.p);
    const std::vector<double> adjusted = stats::adjust(p, out.adjustment),
                              adjusted_q = stats::adjust(q, out.adjustment);
    for (size_t i = 0; i < family.size(); ++i) family[i]->p_adjusted = adjusted[i];
    for (size_t i = 0; i < margins.size(); ++i) margins[i]->margin_p_adjusted = adjusted_q[i];
    const auto size = [](const std::vector<double>& v) {
      return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](double x) { return !std::isnan(x); }));
    };
    for (auto& table : out.metrics)
      for (auto& pt : table.phases)
        if (pt.phase == phase) pt.family = size(p), pt.margins = size(q);
  }
}

// Warnings: a variant confirmed under another config than it was explored with, a phase
// without the reference, a variant pooling several configs; each once, sorted.
void add_warnings(Comparison& out) {
  for (const auto& table : out.metrics) {
    std::map<std::string, std::vector<std::string>> explored;
    for (const auto& pt : table.phases) {
      if (!pt.has_reference)
        out.warnings.push_back(std::string("the ") + pt.phase + " phase has no finished run of the reference '" +
                               out.reference + "' with " + table.metric + ": nothing there is tested");
      for (const auto& row : pt.rows) {
        if (pt.phase == "explore") explored[row.variant] = row.hashes;
        if (pt.phase == "confirm" && explored.count(row.variant) && explored[row.variant] != row.hashes)
          out.warnings.push_back("variant '" + row.variant + "' was confirmed under config hash " +
                                 row.hashes.front().substr(0, 12) + " but explored under " +
                                 explored[row.variant].front().substr(0, 12) +
                                 (explored[row.variant].size() > 1 ? " (and others)" : "") +
                                 ": the confirmed variant is not the one chosen");
        if (row.configs > 1)
          out.warnings.push_back("variant '" + row.variant + "' pools runs of " + std::to_string(row.configs) +
                                 " resolved configs in the " + pt.phase + " phase (--set overrides?); see `htm query " +
                                 "\"SELECT id, seed, config_hash FROM runs\"` and compare --hash");
      }
    }
  }
  std::sort(out.warnings.begin(), out.warnings.end());
  out.warnings.erase(std::unique(out.warnings.begin(), out.warnings.end()), out.warnings.end());
}

}  // namespace

Comparison compare_study(ResultsStore& store, CompareRequest& request) {
  for (const auto& target : request.targets)
    if (std::find(request.metrics.begin(), request.metrics.end(), target.metric) == request.metrics.end())
      request.metrics.push_back(target.metric);
  for (const auto& margin : request.margins)
    if (std::find(request.metrics.begin(), request.metrics.end(), margin.metric) == request.metrics.end())
      request.metrics.push_back(margin.metric);
  Comparison out;
  out.adjustment = request.adjustment;
  std::vector<Samples> loaded;
  std::vector<std::string> variants;  // first-run order over every metric
  for (const auto& metric : request.metrics) {
    loaded.push_back(load(store, request, metric));
    for (const auto& v : loaded.back().order)
      if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
  }
  if (variants.empty())
    throw Error("no finished run of experiment '" + request.experiment + "' has the metric " +
                (request.metrics.size() == 1 ? "'" + request.metrics[0] + "'" : "s asked for") +
                (request.filter.any() ? " among the runs the filters select" : "") + " in " + store.path());
  if (request.reference.empty()) request.reference = variants.front();
  if (std::find(variants.begin(), variants.end(), request.reference) == variants.end())
    throw Error("experiment '" + request.experiment + "' has no finished variant '" + request.reference + "'");
  out.reference = request.reference;
  for (size_t m = 0; m < request.metrics.size(); ++m)
    out.metrics.push_back(metric_table(store, request, request.metrics[m], loaded[m]));
  adjust_families(out);
  add_warnings(out);
  for (const std::string& shared : shared_data_warnings(store, request.experiment)) out.warnings.push_back(shared);
  std::sort(out.warnings.begin(), out.warnings.end());
  return out;
}

}  // namespace htm
