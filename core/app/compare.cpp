#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <set>

#include <boost/math/distributions/students_t.hpp>
#include <boost/program_options.hpp>

#include "commands.h"
#include "htm/error.h"
#include "config/settings.h"
#include "store/results_store.h"
#include "table.h"

namespace po = boost::program_options;

namespace htm {
namespace {

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance(const std::vector<double>& v) {  // unbiased
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

std::string fixed(double value, int digits = 5) {
  if (std::isnan(value)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return buf;
}

}  // namespace

WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  WelchResult r;
  r.p_value = std::numeric_limits<double>::quiet_NaN();
  if (a.size() < 2 || b.size() < 2) return r;
  const double va = variance(a) / a.size(), vb = variance(b) / b.size();
  if (!(va + vb > 0)) return r;
  r.t = (mean(a) - mean(b)) / std::sqrt(va + vb);
  r.df = (va + vb) * (va + vb) /
         (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  boost::math::students_t_distribution<double> t_dist(r.df);
  r.p_value = 2 * boost::math::cdf(boost::math::complement(t_dist, std::abs(r.t)));
  return r;
}

std::vector<CompareRow> compare_variants(ResultsStore& store, const std::string& experiment, const std::string& split,
                                         const std::string& metric, std::string& reference, const RunFilter& filter) {
  // The last value of the metric in every finished run, grouped by variant in run order. A seed
  // run again (--force, say under a new tag) is one sample, not two: its latest run counts.
  std::string sql =
      "SELECT r.variant, m.value, r.config_hash, r.seed FROM runs r JOIN experiments e ON e.id = r.experiment_id "
      "JOIN latest_metrics m ON m.run_id = r.id WHERE e.name = ? AND r.status = 'finished' "
      "AND m.split = ? AND m.name = ? AND m.value IS NOT NULL";
  std::vector<SqlValue> params = {experiment, split, metric};
  if (!filter.hash.empty()) {
    sql += " AND substr(r.config_hash, 1, length(?)) = ?";
    params.insert(params.end(), {filter.hash, filter.hash});
  }
  for (const auto& [key, value] : filter.tags) {
    sql += " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = ? AND t.value = ?)";
    params.insert(params.end(), {key, value});
  }
  auto rows = store.query(sql + " ORDER BY r.id", params);
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, std::set<std::string>> configs;
  std::map<std::pair<std::string, std::string>, size_t> latest;  // (variant, seed) → its last row
  for (size_t i = 0; i < rows.rows.size(); ++i) latest[{rows.rows[i][0], rows.rows[i][3]}] = i;
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    const auto& row = rows.rows[i];
    if (latest[{row[0], row[3]}] != i) continue;
    if (!values.count(row[0])) order.push_back(row[0]);
    values[row[0]].push_back(std::stod(row[1]));
    configs[row[0]].insert(row[2]);
  }
  if (order.empty())
    throw Error("no finished run of experiment '" + experiment + "' has a " + split + " metric '" + metric + "'" +
                (filter.hash.empty() && filter.tags.empty() ? "" : " among the runs the filters select") + " in " +
                store.path());
  if (reference.empty()) reference = order.front();
  if (!values.count(reference)) throw Error("experiment '" + experiment + "' has no finished variant '" + reference + "'");
  const std::vector<double>& ref = values[reference];
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<CompareRow> out;
  for (const auto& variant : order) {
    CompareRow row;
    row.variant = variant;
    row.values = values[variant];
    row.mean = mean(row.values);
    row.sd = row.values.size() > 1 ? std::sqrt(variance(row.values)) : nan;
    row.diff = row.mean - mean(ref);
    row.configs = configs[variant].size();
    row.ci_low = row.ci_high = row.p_value = nan;
    if (variant != reference) {
      const WelchResult w = welch_t_test(row.values, ref);
      row.p_value = w.p_value;
      if (!std::isnan(w.p_value)) {
        const double se = std::sqrt(variance(row.values) / row.values.size() + variance(ref) / ref.size());
        const double t = boost::math::quantile(boost::math::students_t_distribution<double>(w.df), 0.975);
        row.ci_low = row.diff - t * se;
        row.ci_high = row.diff + t * se;
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

int cmd_compare(const Args& args) {
  po::options_description opts("options");
  std::string experiment, split, reference, db;
  std::vector<std::string> metrics, tags;
  RunFilter filter;
  opts.add_options()
      ("experiment", po::value(&experiment)->required(), "experiment name (as `htm runs` shows it)")
      ("metric,m", po::value(&metrics)->composing(), "metric name, e.g. mse (repeatable: one column each; default mse)")
      ("split", po::value(&split)->default_value("test"), "metric split: test or train")
      ("reference,r", po::value(&reference), "variant the others are compared with (default: the first run's)")
      ("hash", po::value(&filter.hash), "only runs whose config hash starts with this")
      ("tag", po::value(&tags)->composing(), "only runs tagged key=value (repeatable: all of them)")
      ("db", po::value(&db)->default_value(kDefaultResultsPath), "results database");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_options("compare", args, opts, pos, vm, "EXPERIMENT [--metric M...] [--reference VARIANT] [--hash H] [--tag k=v]"))
    return 0;
  if (metrics.empty()) metrics = {"mse"};
  for (const auto& tag : tags) filter.tags.push_back(key_value("--tag", tag));

  ResultsStore store(db, OpenMode::read_only);
  if (metrics.size() > 1) {  // several metrics: one column each, mean ± sd and p against the reference
    QueryResult table;
    table.columns = {"variant", "n"};
    std::vector<std::vector<CompareRow>> columns;
    for (const auto& metric : metrics) {
      columns.push_back(compare_variants(store, experiment, split, metric, reference, filter));
      table.columns.push_back(metric + " mean +- sd");
      table.columns.push_back("p");
    }
    for (const auto& first : columns.front()) {
      std::vector<std::string> line = {first.variant, std::to_string(first.values.size())};
      for (const auto& column : columns) {
        auto found = std::find_if(column.begin(), column.end(), [&](const CompareRow& r) { return r.variant == first.variant; });
        if (found == column.end()) {
          line.insert(line.end(), {"", ""});
          continue;
        }
        line.push_back(fixed(found->mean) + (std::isnan(found->sd) ? "" : " +- " + fixed(found->sd, 2)));
        line.push_back(found->variant == reference ? "" : fixed(found->p_value, 3));
      }
      table.rows.push_back(line);
    }
    std::printf("%s %s metrics, last value of the latest finished run per seed, p (Welch) against %s\n%s", experiment.c_str(),
                split.c_str(), reference.c_str(), format_table(table).c_str());
    return 0;
  }
  const std::string& metric = metrics.front();
  const std::vector<CompareRow> rows = compare_variants(store, experiment, split, metric, reference, filter);
  QueryResult table;
  table.columns = {"variant", "n", "mean", "sd", "diff vs " + reference, "p (Welch)", "95% CI of diff"};
  for (const auto& r : rows) {
    const bool is_ref = r.variant == reference;
    table.rows.push_back({r.variant, std::to_string(r.values.size()), fixed(r.mean), fixed(r.sd),
                          is_ref ? "" : fixed(r.diff), is_ref ? "" : fixed(r.p_value, 3),
                          std::isnan(r.ci_low) ? "" : "[" + fixed(r.ci_low) + ", " + fixed(r.ci_high) + "]"});
  }
  std::printf("%s %s/%s, last value of the latest finished run per seed\n%s", experiment.c_str(), split.c_str(), metric.c_str(),
              format_table(table).c_str());
  for (const auto& r : rows)
    if (r.configs > 1)
      std::printf("note: variant '%s' pools runs of %zu different resolved configs (--set overrides?); "
                  "see `htm query \"SELECT id, seed, config_hash FROM runs\"` and compare --hash\n",
                  r.variant.c_str(), r.configs);
  return 0;
}

}  // namespace htm
