// `htm report EXPERIMENT`: its options, and the page written to a file (the page itself: web/report.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <boost/program_options.hpp>

#include "commands/claim_options.h"
#include "commands/commands.h"
#include "config/settings.h"
#include "htm/error.h"
#include "store/names.h"
#include "study/comparison.h"
#include "web/report.h"

namespace po = boost::program_options;

namespace htm {
namespace {

int cmd_report(const Args& args) {
  po::options_description opts("options");
  ReportRequest request;
  ClaimOptions claims;
  opts.add_options()("experiment", po::value(&request.experiment)->required(),
                     "experiment name (as `htm runs` shows it)")(
      "out,o", po::value(&request.out), "HTML file to write (default: results/reports/EXPERIMENT.html)")(
      "metric,m", po::value(&request.metrics)->composing(),
      "a metric in the final-values panel, as htm compare takes it: name (test/name) or split/name "
      "(repeatable; default: the task's, e.g. test/mse)")("reference,r", po::value(&request.reference),
                                                          "variant the others are compared with (default: the first)")(
      "chart-js", po::value(&request.chart_js), "Chart.js file to inline (default: Debian's libjs-chart.js)")(
      "artifacts", po::value(&request.artifact_roots)->composing(),
      "a folder whose runs' pictures are read though htm run did not mark it (repeatable; docs/report.md)")(
      "db", po::value(&request.db)->default_value(kDefaultResultsPath), "results database");
  add_claim_options(opts, claims);  // targets drawn in the final-values panel; split defaults to test
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_options("report", args, opts, pos, vm,
                     "EXPERIMENT [-o FILE.html] [--metric [split/]name] [--reference V] [--target 'M>=X'] "
                     "[--artifacts DIR]"))
    return 0;
  std::tie(request.adjustment, request.targets) = parse_claims(claims, "test");
  request.collapse = claims.collapse;
  const std::string chart_js = chart_js_source(request.chart_js);
  ResultsStore store(request.db, OpenMode::read_only);
  for (auto& m : request.metrics) {  // sibling_f1 as htm compare reads it; one no run logged is a misspelling
    const std::string typed = m;
    require_metric(store, "--metric " + typed, typed, m = qualified_metric(m, "test"));
  }
  const std::string data = report_data(store, request);
  if (request.out.empty()) request.out = "results/reports/" + request.experiment + ".html";
  const std::filesystem::path out(request.out);
  std::error_code ec;
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  std::ofstream file(request.out, std::ios::binary);
  file << report_page(data, "<script>" + chart_js + "</script>", "htm report: " + request.experiment);
  file.close();
  if (!file) throw Error("cannot write the report '" + request.out + "'");
  std::printf("%s\n", request.out.c_str());
  return 0;
}
}  // namespace

const RegisterCommand register_report(
    110, "report", "one self-contained HTML page of a study: settings, curves, final values, pictures", cmd_report);

}  // namespace htm
