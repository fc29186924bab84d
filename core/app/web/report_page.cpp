// The page `htm report` writes: its assets (web/assets: page and report styles, the shared script,
// report.html and report.js, which draws report_data's JSON with Chart.js) and the data, all
// inline, so the file opens offline, from anywhere; and where the Chart.js it inlines is read from.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "htm/error.h"
#include "web/assets.h"
#include "web/page_text.h"
#include "web/report.h"

namespace htm {

std::string report_page(const std::string& data, const std::string& chart_js, const std::string& title,
                        const std::string& live) {
  return page::document(title, std::string(assets::page_css) + assets::report_css,
                        chart_js + "\n<script id=\"data\" type=\"application/json\">" + data + "</script>\n" +
                            assets::report_html + page::script(assets::pictures_js) + page::script(assets::report_js) +
                            live);
}

std::string chart_js_source(const std::string& path) {
  // The file named, else HTM_CHART_JS (a prefix without a package manager: scripts/gpu/offline-deps.sh
  // sets it), else Debian's package's.
  const char* env = std::getenv("HTM_CHART_JS");
  const std::vector<std::string> candidates =
      !path.empty()            ? std::vector<std::string>{path}
      : env != nullptr && *env ? std::vector<std::string>{env}
                               : std::vector<std::string>{"/usr/share/javascript/chart.js/chart.min.js",
                                                          "/usr/share/javascript/chart.js/chart.js"};
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) {
      std::ifstream in(candidate, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
  }
  throw Error("Chart.js was not found at " + candidates.front() +
              " (install Debian's libjs-chart.js: scripts/install-deps.sh does)");
}

}  // namespace htm
