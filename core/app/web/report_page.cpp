// The page `htm report` writes: its assets (web/assets: page and report styles, the shared script,
// report.html and report.js, which draws report_data's JSON with Chart.js) and the data, all
// inline, so the file opens offline, from anywhere.
#include <string>

#include "web/assets.h"
#include "web/page_text.h"
#include "web/report.h"

namespace htm {

std::string report_page(const std::string& data, const std::string& chart_js, const std::string& title,
                        const std::string& live) {
  return page::document(title, std::string(assets::page_css) + assets::report_css,
                        chart_js + "\n<script id=\"data\" type=\"application/json\">" + data + "</script>\n" +
                            assets::report_html + page::script(assets::report_js) + live);
}

}  // namespace htm
