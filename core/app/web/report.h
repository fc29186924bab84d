// `htm report EXPERIMENT`: one self-contained HTML page of a study — what differs between its
// variants, every metric's curve over steps (mean over seeds with the min–max band), the final
// values against a reference variant as `htm compare` computes them, and the runs' pictures.
// Charts are drawn by Chart.js, read from Debian's libjs-chart.js and inlined; the data goes in
// as JSON. docs/report.md describes each panel.
#pragma once

#include <string>
#include <vector>

#include "stats/statistics.h"
#include "store/artifact_trust.h"
#include "store/results_store.h"

namespace htm {

/// Which curves report_data carries. A study page of htm serve starts with `main` (the study's own
/// metrics, drawn first, and the references drawn on them; every other metric by name only) and
/// asks for the `rest` once those are drawn; a file (htm report) and the JSON route hold `all`.
enum class ReportCurves { all, main, rest };

struct ReportRequest {
  std::string experiment;
  std::string db;
  std::string out;                   ///< empty: results/reports/<experiment>.html
  std::string reference;             ///< empty: the first variant
  std::vector<std::string> metrics;  ///< "split/name" in the final-values panel; empty: the task's own
  std::string chart_js;              ///< Chart.js to inline; empty: the Debian package's file
  stats::Adjustment adjustment = stats::Adjustment::holm;
  std::vector<stats::Target> targets;       ///< metric as split/name: drawn as a line beside each variant's bound
  double collapse = -1;                     ///< > 0: count runs that end this far below their peak
  bool finals_only = false;                 ///< report_data: the final-values panel alone (htm serve)
  ReportCurves curves = ReportCurves::all;  ///< rest: report_data is {experiment, curves} alone
  bool inline_pictures = true;              ///< false: pictures by their /artifact/RUN_ID/PATH route (htm serve)
  /// Folders whose runs' pictures are read besides the ones htm run marked (--artifacts; artifact_trust.h).
  std::vector<std::string> artifact_roots;
};

/// The page's JSON data: runs, differing settings, curves, final comparisons, pictures.
std::string report_data(ResultsStore& store, ReportRequest& request);
/// The whole page: `data` (report_data's JSON) in the template, after `chart_script` (the
/// <script> element that defines Chart: inline for a file, a route for `htm serve`). `live`:
/// HTML appended after the page's script (`htm serve`'s polling for fresh data; empty in a file).
std::string report_page(const std::string& data, const std::string& chart_script, const std::string& title,
                        const std::string& live = "");
/// The Chart.js source the page inlines; throws htm::Error naming the package when absent.
std::string chart_js_source(const std::string& path = "");

}  // namespace htm
