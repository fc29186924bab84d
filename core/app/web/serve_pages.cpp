// The pages of `htm serve` as rows: the runs table, one run's live curves, chosen runs compared, a
// study (htm report's page, refreshed while its runs train) and a sweep's parallel coordinates,
// each with the JSON routes its script reads. Each page but the study's is a fixed page whose
// script reads the JSON routes; values reach the page only as text nodes and attributes (el() in
// page.js), never as HTML. A page that fails to draw says so in #errors, which the browser test reads.
#include "web/serve_pages.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "htm/error.h"
#include "web/assets.h"
#include "web/page_text.h"
#include "web/report.h"

namespace htm::serve {
namespace {

int64_t integer(const httplib::Request& req, const std::string& name, int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  const std::string text = req.get_param_value(name);
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw BadRequest(name + "=" + text + ": expected an integer");
}

// ?points=N&from=STEP&to=STEP&smooth=W&raw=0 (docs/serve.md).
SeriesQuery series_query(const httplib::Request& req) {
  SeriesQuery q;
  q.points = std::max<int64_t>(0, integer(req, "points", 0));
  q.from = integer(req, "from", q.from);
  q.to = integer(req, "to", q.to);
  q.raw = req.get_param_value("raw") != "0";
  const std::string smooth = req.get_param_value("smooth");
  char* end = nullptr;
  q.smooth = smooth.empty() ? 0 : std::strtod(smooth.c_str(), &end);
  if (!smooth.empty() && (*end != 0 || !(q.smooth >= 0 && q.smooth < 1)))
    throw BadRequest("smooth=" + smooth + ": expected a number from 0 to 0.99");
  return q;
}

// What a study's page or JSON asks for: the study, its reference variant (?reference=), pictures
// by their /artifact/ route, never inlined.
ReportRequest study_request(const RouteContext& c, const httplib::Request& req) {
  ReportRequest request;
  request.experiment = req.matches[1].str();
  request.reference = req.get_param_value("reference");
  request.inline_pictures = false;
  request.artifact_roots = c.options.artifact_roots;
  return request;
}

// A study's report_data (finals_only: its final-values panel; ?curves=main: the page's first
// curves, the others by name); an unknown study is a 404.
std::string study(RouteContext& c, const httplib::Request& req, bool finals_only,
                  ReportCurves curves = ReportCurves::all) {
  ReportRequest request = study_request(c, req);
  request.finals_only = finals_only;
  const std::string asked = req.get_param_value("curves");
  if (curves == ReportCurves::all && asked == "main")
    curves = ReportCurves::main;
  else if (curves == ReportCurves::all && !asked.empty() && asked != "all")
    throw BadRequest("curves=" + asked + ": expected main or all");
  request.curves = curves;
  require_study(c.store, request.experiment);
  try {
    return report_data(c.store, request);
  } catch (const Error& e) {
    throw BadRequest(e.what());
  }
}

std::string runs(RouteContext& c, const httplib::Request& req) {
  RunsQuery q;
  q.experiment = req.get_param_value("experiment");
  q.status = req.get_param_value("status");
  for (auto [name, list] : {std::pair{"where", &q.where}, {"column", &q.columns}, {"chart", &q.chart}})
    for (size_t i = 0; i < req.get_param_value_count(name); ++i) list->push_back(req.get_param_value(name, i));
  if (req.has_param("sort")) q.sort = req.get_param_value("sort");
  q.group = req.get_param_value("group");
  q.descending = req.get_param_value("order") != "asc";
  q.page = integer(req, "page", 0);
  q.size = integer(req, "size", 50);
  q.archived = req.get_param_value("archived") == "1";  // archived runs too (left out otherwise)
  return runs_json(c.store, q);
}

std::string run(RouteContext& c, const httplib::Request& req) {
  const SeriesQuery series = series_query(req);  // ?points=N: the series thinned, not the rows
  return run_json(c.store, path_id(req.matches[1].str(), "run"), integer(req, "after", 0), integer(req, "limit", 20000),
                  c.trust, req.has_param("points") ? &series : nullptr);
}

// htm report's page of the study, its first curves inline, redrawn while the study trains (live.js).
std::string study_page(RouteContext& c, const httplib::Request& req) {
  ReportRequest request = study_request(c, req);
  request.curves = ReportCurves::main;  // the page asks for the other curves once these are drawn
  require_study(c.store, request.experiment);
  std::string data;
  try {
    data = report_data(c.store, request);
  } catch (const Error& e) {  // a page was asked for: a page says what is missing
    throw NotFound(e.what());
  }
  const std::string live = page::script("const LIVE = '/api/study/' + encodeURIComponent(" +
                                        page::quote(request.experiment) + ");\n" + assets::live_js);
  return report_page(data, "<script src=\"/static/chart.js\"></script>", "htm serve: " + request.experiment, live);
}

}  // namespace

const std::vector<PageRow>& page_rows() {
  static const std::vector<PageRow> rows = {
      {"/", "htm serve: runs", assets::runs_html, assets::runs_js, Subject::none, nullptr, {{"/api/runs", runs}}},
      {R"(/run/([^/]+))",
       "htm serve: run",  // its curves grow as the run logs (the page asks for the rows after its last)
       assets::run_html,
       assets::run_js,
       Subject::run,
       nullptr,
       {{R"(/api/run/([^/]+))", run},
        {R"(/api/run/([^/]+)/series)",
         [](RouteContext& c, const httplib::Request& req) {
           return series_json(c.store, path_id(req.matches[1].str(), "run"), series_query(req));
         }}}},
      // The runs come from the address (?runs=3,7,12); it reads /api/runs and /api/run/ID.
      {"/compare", "htm serve: compare runs", assets::compare_html, assets::compare_js, Subject::none, nullptr, {}},
      {R"(/study/([^/]+))",
       "htm serve:",
       nullptr,
       nullptr,
       Subject::study,
       study_page,
       {{R"(/api/study/([^/]+)/version)",
         [](RouteContext& c, const httplib::Request& req) { return study_version(c.store, req.matches[1].str()); }},
        {R"(/api/study/([^/]+)/finals)",
         [](RouteContext& c, const httplib::Request& req) { return study(c, req, true); }},
        {R"(/api/study/([^/]+)/curves)",
         [](RouteContext& c, const httplib::Request& req) {
           return study(c, req, false, ReportCurves::rest);  // the curves a study page names but left out
         }},
        {R"(/api/study/([^/]+))", [](RouteContext& c, const httplib::Request& req) { return study(c, req, false); }}}},
      {R"(/sweep/([^/]+))",
       "htm serve: sweep",
       assets::sweep_html,
       assets::sweep_js,
       Subject::study,
       nullptr,
       {{R"(/api/sweep/([^/]+))",
         [](RouteContext& c, const httplib::Request& req) {
           const std::string metric = req.has_param("metric") ? req.get_param_value("metric") : "test/mse";
           const std::string phase = req.has_param("phase") ? req.get_param_value("phase") : "explore";
           return sweep_json(c.store, req.matches[1].str(), metric, phase);
         }}}},
  };
  return rows;
}

std::string page_html(const PageRow& row, RouteContext& c, const httplib::Request& req) {
  if (row.make) return row.make(c, req);
  std::string title = row.title, html = row.html, constant;
  if (row.subject == Subject::run) {
    const int64_t id = path_id(req.matches[1].str(), "run");
    if (c.store.query("SELECT 1 FROM runs WHERE id = ?", {id}).rows.empty())
      throw NotFound("There is no run " + std::to_string(id) + " in " + c.options.db + ".");
    const std::string text = std::to_string(id);
    title += " " + text;
    html = page::replace_all(html, "RUN_ID", text);
    constant = "const RUN = " + text + ";\n";
  } else if (row.subject == Subject::study) {
    const std::string name = req.matches[1].str();
    require_study(c.store, name);
    title += " " + name;
    // The name goes into the script as a JSON string ('<' escaped: no "</script>" can end it).
    constant = "const EXPERIMENT = " + page::quote(name) + ";\n";
  }
  // A page of htm serve's own: the shared styles and helpers, the navigation, then the page.
  return page::document(title, std::string(assets::page_css) + assets::serve_css,
                        page::script(assets::serve_js) +
                            "<nav><a href=\"/\">runs</a><span class=\"muted\">htm serve: read only</span></nav>\n" +
                            html + page::script(constant + row.js));
}

int64_t path_id(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw BadRequest(what + " '" + text + "': expected a number");
}

}  // namespace htm::serve
