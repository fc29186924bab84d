// The pages of `htm serve` other than a study's (which is `htm report`'s page): the runs table,
// one run's live curves, a sweep's parallel coordinates, chosen runs compared. Each is a fixed page whose script reads
// the JSON routes; values reach the page only as text nodes and attributes (el() below), never
// as HTML. A page that fails to draw says so in #errors, which the browser test reads.
#include <string>

#include "web/assets.h"
#include "web/page_text.h"
#include "web/serve.h"

namespace htm::serve {
namespace {

// A page of htm serve's own: the shared styles and helpers, the navigation, `body`.
std::string serve_page(const std::string& title, const std::string& body) {
  return page::document(title, std::string(assets::page_css) + assets::serve_css,
                        page::script(assets::serve_js) +
                            "<nav><a href=\"/\">runs</a><span class=\"muted\">htm serve: read only</span></nav>\n" +
                            body);
}

}  // namespace

std::string runs_page() {
  return serve_page("htm serve: runs", std::string(assets::runs_html) + page::script(assets::runs_js));
}

std::string run_page(int64_t run_id) {  // its curves grow as the run logs (the page asks for the rows after its last)
  const std::string id = std::to_string(run_id);
  return serve_page("htm serve: run " + id, page::replace_all(assets::run_html, "RUN_ID", id) +
                                                page::script("const RUN = " + id + ";\n" + assets::run_js));
}

std::string sweep_page(const std::string& experiment) {
  // The name goes into the script as a JSON string ('<' escaped: no "</script>" can end it).
  return serve_page("htm serve: sweep " + experiment,
                    std::string(assets::sweep_html) +
                        page::script("const EXPERIMENT = " + page::quote(experiment) + ";\n" + assets::sweep_js));
}

std::string compare_page() {  // the runs come from the address: ?runs=3,7,12
  return serve_page("htm serve: compare runs", std::string(assets::compare_html) + page::script(assets::compare_js));
}

}  // namespace htm::serve
