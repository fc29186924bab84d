// The web pages' assets (web/assets/*), embedded at build time (cmake/embed_assets.cmake): each
// file's text as a constant named after it, "page.css" → page_css. Edit the files, not the
// generated source.
#pragma once

namespace htm::assets {

extern const char* const page_css;    ///< every page
extern const char* const page_js;     ///< every page: errors shown, el(), fmt()
extern const char* const charts_js;   ///< every page, after page_js: the curve charts (Charts)
extern const char* const report_css;  ///< htm report's page (and htm serve's study page)
extern const char* const report_html;
extern const char* const report_js;
extern const char* const live_js;    ///< htm serve's study page: redraws while the study trains
extern const char* const serve_css;  ///< htm serve's runs, run and sweep pages
extern const char* const serve_js;
extern const char* const runs_html;
extern const char* const runs_js;
extern const char* const run_html;
extern const char* const run_js;
extern const char* const sweep_html;
extern const char* const sweep_js;
extern const char* const compare_html;  ///< htm serve's compare page: chosen runs overlaid
extern const char* const compare_js;
extern const char* const notes_js;  ///< the run and runs pages' notes, tags, archive and saved views (/static/notes.js)

/// The run, compare and study pages' pictures (enlarged on a click); /static/pictures.js.
extern const char* const pictures_js;

}  // namespace htm::assets
