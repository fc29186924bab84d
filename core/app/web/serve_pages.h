// htm serve's pages as rows (as the commands are: commands/command_registry.h): each page's
// address, title, assets and the JSON routes its script reads, in one table (serve_pages.cpp)
// that the server's routing reads. A new page is its assets (web/assets/NAME.html, NAME.js,
// embedded and declared by the build) and one row; docs/serve.md lists the routes.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/artifact_trust.h"
#include "store/results_store.h"
#include "web/serve.h"

namespace htm::serve {

/// What a route reads: this worker thread's connection to the database, the server's options and
/// which runs' folders it serves files from.
struct RouteContext {
  ResultsStore& store;
  const ServeOptions& options;
  const ArtifactTrust& trust;
};
/// A route's answer (a page's HTML or JSON) to a request; throws NotFound (404) or BadRequest (400)
/// with the text the answer gives instead (a page for a page, JSON under /api/).
using Builder = std::function<std::string(RouteContext&, const httplib::Request&)>;

/// What a page's route captures: nothing; a run id (400 when not a number, 404 without such a run;
/// its script starts `const RUN = ID;`, its HTML's RUN_ID is the id); a study (404 without one; its
/// script starts `const EXPERIMENT = "NAME";`). A subject is appended to the title.
enum class Subject { none, run, study };

struct JsonRoute {
  const char* route;  ///< cpp-httplib's pattern, under /api/
  Builder json;
};

/// One page of htm serve.
struct PageRow {
  const char* route;  ///< cpp-httplib's pattern; its one capture, if any, is the subject
  const char* title;  ///< "htm serve: runs"; a subject follows after a space
  const char* html;   ///< its body (an asset), after the shared styles, serve.js and the navigation
  const char* js;     ///< its script (an asset), after the subject's constant
  Subject subject = Subject::none;
  Builder make;                 ///< a page drawn otherwise (the study page: htm report's); html and js unused
  std::vector<JsonRoute> json;  ///< the JSON routes its script reads first
};

/// Every page of htm serve, with its JSON routes, in the order the server adds them.
const std::vector<PageRow>& page_rows();
/// The page `row` answers `req` with (its subject checked first).
std::string page_html(const PageRow& row, RouteContext& context, const httplib::Request& req);

/// A number in a route's path (a run id), else BadRequest naming `what` and what came.
int64_t path_id(const std::string& text, const std::string& what);

}  // namespace htm::serve
