// `htm compare`: its options, and the tables it prints of a Comparison (study/comparison.h):
// aligned for people, or (--format csv) one row per phase, metric and variant at full precision.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

#include <boost/program_options.hpp>

#include "commands/claim_options.h"
#include "commands/commands.h"
#include "commands/table.h"
#include "config/settings.h"
#include "htm/error.h"
#include "store/results_store.h"
#include "study/comparison.h"

namespace po = boost::program_options;

namespace htm {
namespace {

std::string fixed(double value, int digits = 5) {
  if (std::isnan(value)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return buf;
}

std::string interval(double low, double high, int digits = 3) {
  return std::isnan(low) ? "" : "[" + fixed(low, digits) + ", " + fixed(high, digits) + "]";
}

const char* phase_title(const std::string& phase) {
  return phase == "confirm" ? "confirmation (htm run --confirm: seeds no variant was chosen on)"
                            : "exploration (the seeds variants were chosen on: for choosing, not for claims)";
}

std::string target_cell(const CompareRow& row) {
  if (!row.has_target || std::isnan(row.target.bound)) return "";
  return fixed(row.target.bound, 4) + (row.target.met ? " met" : " NOT met");
}

// "-0.0003 vs -0.0095, p 0.001 met": the bound on the difference, the margin in the metric's
// units, the adjusted p; met when it is below 0.05.
std::string margin_cell(const CompareRow& row) {
  if (!row.has_margin || std::isnan(row.margin.bound)) return "";
  return fixed(row.margin.bound, 4) + " vs " + fixed(row.margin.threshold, 4) + ", p " +
         fixed(row.margin_p_adjusted, 3) + (row.margin_p_adjusted < 0.05 ? " met" : " NOT met");
}

std::string margin_column(const MetricTable& table, const char* adjustment) {
  return std::string("margin ") + table.margin.text + ": " + (table.margin.at_least ? "lower" : "upper") +
         " 95% bound of diff vs margin, p (" + adjustment + ")";
}

void print_margin_note(const PhaseTable& pt, const char* adjustment) {
  if (pt.margins > 0)
    std::printf(
        "margin: met where its one-sided p, adjusted (%s) over the %zu margin claims of this phase, is below "
        "0.05\n",
        adjustment, pt.margins);
}

void print_one_metric(const Comparison& c, const MetricTable& table, const CompareRequest& request) {
  const char* adj = stats::adjustment_name(c.adjustment);
  for (const auto& pt : table.phases) {
    std::vector<int64_t> seeds;
    for (const auto& row : pt.rows) seeds.insert(seeds.end(), row.seeds.begin(), row.seeds.end());
    std::printf("\n%s, seeds %s\n", phase_title(pt.phase), seed_list(seeds).c_str());
    QueryResult t;
    t.columns = {"variant",
                 "n",
                 "mean",
                 "sd",
                 "diff vs " + c.reference,
                 "effect %",
                 "95% CI of effect %",
                 "test",
                 "p",
                 std::string("p (") + adj + ")"};
    if (table.has_target)
      t.columns.push_back(std::string(table.target.at_least ? "lower" : "upper") + " 95% bound: " + table.target.text);
    if (table.has_margin) t.columns.push_back(margin_column(table, adj));
    if (request.collapse > 0) t.columns.push_back("collapsed (>" + fixed(request.collapse, 3) + " below peak)");
    for (const auto& r : pt.rows) {
      std::vector<std::string> line = {r.variant, std::to_string(r.values.size()), fixed(r.mean), fixed(r.sd, 3)};
      if (r.tested) {
        line.insert(line.end(),
                    {fixed(r.test.diff), fixed(r.effect.percent, 3), interval(r.effect.ci_low, r.effect.ci_high),
                     stats::test_name(r.test.kind), fixed(r.test.p, 3), fixed(r.p_adjusted, 3)});
      } else {
        line.insert(line.end(), {"", "", "", r.reference ? "(reference)" : "", "", ""});
      }
      if (table.has_target) line.push_back(target_cell(r));
      if (table.has_margin) line.push_back(margin_cell(r));
      if (request.collapse > 0) line.push_back(std::to_string(r.collapsed) + " of " + std::to_string(r.values.size()));
      t.rows.push_back(line);
    }
    std::printf("%s", format_table(t).c_str());
    if (pt.family > 0) std::printf("p (%s): adjusted over the %zu comparisons of this phase\n", adj, pt.family);
    print_margin_note(pt, adj);
  }
}

void print_metrics(const Comparison& c) {
  const char* adj = stats::adjustment_name(c.adjustment);
  for (const char* phase : kPhases) {
    QueryResult t;
    t.columns = {"variant"};
    std::vector<std::string> variants;
    size_t family = 0;
    const PhaseTable* margins = nullptr;  // the phase's margin count, from any metric's table
    for (const auto& table : c.metrics) {
      t.columns.push_back(table.metric + " n");
      t.columns.push_back(table.metric + " mean +- sd");
      t.columns.push_back("effect %");
      t.columns.push_back(std::string("p (") + adj + ")");
      if (table.has_target) t.columns.push_back("bound: " + table.target.text);
      if (table.has_margin) t.columns.push_back(margin_column(table, adj));
      for (const auto& pt : table.phases)
        if (pt.phase == phase) {
          family = pt.family;
          margins = &pt;
          for (const auto& r : pt.rows)
            if (std::find(variants.begin(), variants.end(), r.variant) == variants.end()) variants.push_back(r.variant);
        }
    }
    if (variants.empty()) continue;
    for (const auto& v : variants) {
      std::vector<std::string> line = {v};
      for (const auto& table : c.metrics) {
        const CompareRow* row = nullptr;
        for (const auto& pt : table.phases)
          if (pt.phase == phase)
            for (const auto& r : pt.rows)
              if (r.variant == v) row = &r;
        if (row == nullptr) {
          line.insert(line.end(), 4 + (table.has_target ? 1 : 0) + (table.has_margin ? 1 : 0), "");
          continue;
        }
        line.push_back(std::to_string(row->values.size()));
        line.push_back(fixed(row->mean) + (std::isnan(row->sd) ? "" : " +- " + fixed(row->sd, 2)));
        line.push_back(row->tested ? fixed(row->effect.percent, 3) : "");
        line.push_back(row->tested ? fixed(row->p_adjusted, 3) : "");
        if (table.has_target) line.push_back(target_cell(*row));
        if (table.has_margin) line.push_back(margin_cell(*row));
      }
      t.rows.push_back(line);
    }
    std::printf("\n%s\n%s", phase_title(phase), format_table(t).c_str());
    if (family > 0)
      std::printf("p (%s): %s tests against %s, adjusted over the %zu comparisons of this phase\n", adj,
                  "paired t where seeds match, Welch t otherwise,", c.reference.c_str(), family);
    if (margins != nullptr) print_margin_note(*margins, adj);
  }
}

// --format csv: every number at full precision ("%.17g", empty for NaN or where it does not apply).
std::string full(double value) { return std::isnan(value) ? "" : fixed(value, 17); }

void print_csv(const Comparison& c, const CompareRequest& request) {
  std::printf(
      "phase,metric,variant,reference,n,seeds,values,mean,sd,test,diff,se,t,df,p,p_adjusted,adjustment,family,"
      "diff_ci_low,diff_ci_high,effect,effect_ci_low,effect_ci_high,configs,target,target_bound,target_p,target_met,"
      "margin,margin_bound,margin_threshold,margin_p,margin_p_adjusted,margin_met,collapsed\n");
  for (const char* phase : kPhases)
    for (const auto& table : c.metrics)
      for (const auto& pt : table.phases) {
        if (pt.phase != phase) continue;
        for (const auto& r : pt.rows) {
          std::ostringstream seeds, values;
          for (size_t i = 0; i < r.seeds.size(); ++i)
            seeds << (i ? " " : "") << r.seeds[i], values << (i ? " " : "") << full(r.values[i]);
          const bool tested = r.tested, target = r.has_target, margin = r.has_margin;
          const auto when = [](bool on, const std::string& text) { return on ? text : std::string(); };
          const std::vector<std::string> cells = {
              pt.phase,
              table.metric,
              r.variant,
              r.reference ? "1" : "0",
              std::to_string(r.values.size()),
              seeds.str(),
              values.str(),
              full(r.mean),
              full(r.sd),
              when(tested, r.test.kind == stats::TestKind::paired ? "paired" : "welch"),
              when(tested, full(r.test.diff)),
              when(tested, full(r.test.se)),
              when(tested, full(r.test.t)),
              when(tested, full(r.test.df)),
              when(tested, full(r.test.p)),
              when(tested, full(r.p_adjusted)),
              stats::adjustment_name(c.adjustment),
              std::to_string(pt.family),
              when(tested, full(r.test.ci_low)),
              when(tested, full(r.test.ci_high)),
              when(tested, full(r.effect.percent)),
              when(tested, full(r.effect.ci_low)),
              when(tested, full(r.effect.ci_high)),
              std::to_string(r.configs),
              when(target, table.target.text),
              when(target, full(r.target.bound)),
              when(target, full(r.target.p)),
              when(target && !std::isnan(r.target.bound), r.target.met ? "1" : "0"),
              when(margin, table.margin.text),
              when(margin, full(r.margin.bound)),
              when(margin, full(r.margin.threshold)),
              when(margin, full(r.margin.p)),
              when(margin, full(r.margin_p_adjusted)),
              when(margin && !std::isnan(r.margin.bound), r.margin_p_adjusted < 0.05 ? "1" : "0"),
              when(request.collapse > 0, std::to_string(r.collapsed))};
          std::string line;
          for (size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + csv_cell(cells[i]);
          std::printf("%s\n", line.c_str());
        }
      }
}

// --seeds FIRST-LAST (or one seed): the two ends, checked.
std::pair<int64_t, int64_t> seed_range(const std::string& text) {
  const auto integer = [&](const std::string& part, int64_t* out) {
    size_t used = 0;
    try {
      *out = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    return !part.empty() && used == part.size();
  };
  const size_t dash = text.find('-', 1);  // a leading '-' is a negative seed's sign
  int64_t first = 0, last = 0;
  const bool ok = dash == std::string::npos
                      ? integer(text, &first) && integer(text, &last)
                      : integer(text.substr(0, dash), &first) && integer(text.substr(dash + 1), &last);
  if (!ok || first > last) throw Error("--seeds " + text + ": expected FIRST-LAST, e.g. 1000-1009, or one seed");
  return {first, last};
}

}  // namespace

int cmd_compare(const Args& args) {
  po::options_description opts("options");
  std::string split, db;
  std::vector<std::string> metrics, tags, margins;
  std::string seeds, format;
  CompareRequest request;
  ClaimOptions claims;
  opts.add_options()("experiment", po::value(&request.experiment)->required(),
                     "experiment name (as `htm runs` shows it)")(
      "metric,m", po::value(&metrics)->composing(), "metric name, e.g. mse (repeatable: one column each; default mse)")(
      "split", po::value(&split)->default_value("test"), "metric split: test or train")(
      "reference,r", po::value(&request.reference), "variant the others are compared with (default: the first run's)")(
      "hash", po::value(&request.filter.hash), "only runs whose config hash starts with this")(
      "revision", po::value(&request.filter.revision), "only runs of a git revision starting with this")(
      "seeds", po::value(&seeds), "only runs of these seeds: FIRST-LAST (e.g. 1000-1009) or one seed")(
      "tag", po::value(&tags)->composing(), "only runs tagged key=value (repeatable: all of them)")(
      "margin", po::value(&margins)->composing(),
      "a claim on each variant's difference from the reference, e.g. 'cluster_f1>=-1%' (not worse by more than "
      "1% of its mean) or 'mse<=0.002': the one-sided 95% bound of the difference, p adjusted over the variants")(
      "format,f", po::value(&format)->default_value("table"),
      "table, or csv: one row per phase, metric and variant (n, seeds, each seed's value, mean, sd, test, diff, "
      "t, df, p, adjusted p, CIs, effect %, target, margin and collapse columns), numbers with 17 significant digits "
      "(%.17g), warnings on standard error")("db", po::value(&db)->default_value(kDefaultResultsPath),
                                             "results database");
  add_claim_options(opts, claims);
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_options("compare", args, opts, pos, vm,
                     "EXPERIMENT [--metric M...] [--reference VARIANT] [--target 'M>=X'] [--margin 'M>=-1%'] "
                     "[--adjust holm] "
                     "[--hash H] [--revision R] [--seeds A-B] [--tag k=v] [--format csv]"))
    return 0;
  if (format != "table" && format != "csv") throw Error("--format must be table or csv, not '" + format + "'");
  std::tie(request.adjustment, request.targets) = parse_claims(claims, split);
  request.collapse = claims.collapse;
  for (const auto& text : margins) {
    request.margins.push_back(stats::parse_margin(text));
    request.margins.back().metric = qualified_metric(request.margins.back().metric, split);
  }
  if (metrics.empty() && request.targets.empty() && request.margins.empty()) metrics = {"mse"};
  for (const auto& m : metrics) request.metrics.push_back(qualified_metric(m, split));
  for (const auto& tag : tags) request.filter.tags.push_back(key_value("--tag", tag));
  if (vm.count("seeds")) std::tie(request.filter.first_seed, request.filter.last_seed) = seed_range(seeds);

  ResultsStore store(db, OpenMode::read_only);
  const Comparison c = compare_study(store, request);
  for (const auto& table : c.metrics)
    if (!table.missing.empty()) throw Error(table.missing + " in " + store.path());
  if (format == "csv") {
    print_csv(c, request);
    for (const auto& w : c.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    return 0;
  }
  std::printf("%s: the last value of each seed's latest finished run, against %s\n", request.experiment.c_str(),
              c.reference.c_str());
  if (c.metrics.size() == 1) {
    std::printf(
        "%s; effect: (mean / %s's mean - 1), delta-method CI; test: paired t where the seeds match, "
        "Welch t otherwise\n",
        c.metrics[0].metric.c_str(), c.reference.c_str());
    print_one_metric(c, c.metrics[0], request);
  } else {
    print_metrics(c);
  }
  for (const auto& w : c.warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}
const RegisterCommand register_compare(90, "compare", "per-variant mean, sd and Welch t-test of a metric over seeds",
                                       cmd_compare);

}  // namespace htm
