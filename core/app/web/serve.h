// `htm serve`: the results database in a browser, live. Read-only pages over the same SQLite
// file that `htm run` writes: the runs (filtered, sorted, paged), each study's report (drawn by
// the code of `htm report`, refreshed while its runs train), each run's curves growing as they
// are logged, a sweep's parallel coordinates with a per-setting variance table, and the runs'
// pictures. docs/serve.md describes the routes and the safety rules.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/settings.h"
#include "htm/error.h"
#include "store/artifact_trust.h"
#include "store/results_store.h"

namespace htm {

struct ServeOptions {
  std::string db = kDefaultResultsPath;
  std::string host = "127.0.0.1";
  int port = 8080;                  ///< 0: any free port (tests)
  std::string token;                ///< required to bind anything but a loopback address
  std::string chart_js;             ///< Chart.js file; empty: Debian's libjs-chart.js
  int threads = 64;                 ///< worker threads: each serves one request at a time
  size_t max_request_bytes = 8192;  ///< a longer body is refused (413)
  int timeout_s = 10;               ///< a client slower than this to send a body or read is dropped
  double header_timeout_s = 5;      ///< a connection that has not sent its request head by then is closed
  int client_connections = 256;     ///< connections one client address may hold at once
  /// Take notes, user tags, archived flags and saved views from the pages (--allow-writes; needs
  /// a token): web/serve_write.h.
  bool allow_writes = false;
  /// Folders whose runs' files are served besides the marked ones (--artifacts).
  std::vector<std::string> artifact_roots;
};

/// A request the pages' routes refuse: HTTP 400 with this text (a page, or JSON under /api/).
struct BadRequest : Error {
  using Error::Error;
};
/// A request for what is not there (a run, a study): HTTP 404 with this text.
struct NotFound : BadRequest {
  using BadRequest::BadRequest;
};

namespace serve {

/// The filters of the runs table. Each `where` is KEY OP VALUE, OP one of = != < <= > >= ~
/// (~: contains). KEY: id, experiment, variant, seed, status, git, config_hash; tag.NAME (a tag the
/// run recorded or one given it from the pages: run_user_tags); a
/// final metric split/name (test/mse<0.2); anything else a setting (model.dim=64).
struct RunsQuery {
  std::string experiment, status;
  std::vector<std::string> where;
  std::vector<std::string> columns;  ///< final metrics shown (none: the tasks' own), and settings or
                                     ///< tag.NAME shown beside them (any name without a '/')
  std::string sort = "id";           ///< a runs column (id, experiment, variant, seed, status,
                                     ///< started, duration), a metric split/name, a setting or tag.NAME
  bool descending = true;
  int64_t page = 0, size = 50;
  std::string group;  ///< non-empty: every selected run grouped by this key (a runs column, tag.NAME
                      ///< or a setting), each group's n and its metric columns' n, mean and sd
  /// A chart's keys (metrics, settings, tag.NAME, runs columns): their values for every selected run.
  std::vector<std::string> chart;
  bool archived = false;  ///< also the runs archived from the pages (otherwise left out of all of the above)
};

/// Final-values table of runs as JSON: {"total", "page", "size", "columns", "setting_columns",
/// "runs": [{..., "final": {metric: value}, "settings": {key: typed value}}...], "experiments":
/// [[name, runs, running]...], "settings": [...], "metrics": [...]}; with a group "group" and
/// "groups": [{"value", "n", "stats": {metric: [n, mean, sd]}}...]; with a chart "chart":
/// {"keys", "runs": [[id, value...]...]} over every selected run (at most 20,000). A name no
/// run in the file has (a filter's setting, tag or metric, the group, the sort, a column) is
/// refused (BadRequest), naming the nearest one that a run has.
std::string runs_json(ResultsStore& store, const RunsQuery& query);
/// Which of a run's points a chart draws (/api/run/ID?points=N, /api/run/ID/series): every
/// series over steps [from, to] (and its one point either side, so a line reaches the edges),
/// thinned where it has more than `points` (0: never) to each of points/4 step buckets' first,
/// last, least and greatest point; with `smooth` in (0, 1) also each series' exponential moving
/// average (debiased at the start, as TensorBoard's), computed over every point it logged from
/// its first step, then thinned the same way; without `raw`, that average alone (a page that holds
/// the points and changes only the smoothing).
struct SeriesQuery {
  int64_t points = 0;
  int64_t from = INT64_MIN, to = INT64_MAX;
  double smooth = 0;
  bool raw = true;
};
/// A run's series as columns: {"series": [{"metric", "total" (points logged), "n" (in the range),
/// "step", "value", "time" (seconds since the run started), "epoch" (null when none was logged),
/// "smooth": {"step", "value", "time", "epoch"} or null}...], "last"}: "last" is the run's
/// newest metric rowid.
std::string series_json(ResultsStore& store, int64_t run_id, const SeriesQuery& query);

/// One run: its record, settings (first call only), metrics logged after `after` (a rowid, so
/// that a page polls for what is new), pictures. {"run", "params", "metrics": [[rowid, metric,
/// step, value, time, epoch]...], "last", "more", "artifacts", "artifacts_refused"}; time in
/// seconds since 1970, epoch null where none was logged. The artifacts are the files under the
/// run's folder when `trust` accepts it; else none, and artifacts_refused says why (else null).
/// With `series` (?points=N), the rows are not listed ("metrics": []): "series" holds
/// series_json's series instead, and "last" its rowid (one request draws a run).
std::string run_json(ResultsStore& store, int64_t run_id, int64_t after, int64_t limit = 20000,
                     const ArtifactTrust& trust = ArtifactTrust(), const SeriesQuery* series = nullptr);
/// What changes while a study trains: its runs' statuses and, while one is running, the
/// database's newest metric rowid. A page re-reads the study when this changes.
std::string study_version(ResultsStore& store, const std::string& experiment);
/// A sweep: the finished runs of `phase` (explore|confirm), the settings that differ between
/// them, the final `metric`, and per setting the share of the metric's variance its values
/// explain (eta squared of a one-way ANOVA, with its F test).
std::string sweep_json(ResultsStore& store, const std::string& experiment, const std::string& metric,
                       const std::string& phase);

/// Throws NotFound unless some run belongs to `experiment`, naming the closest study that one does.
void require_study(ResultsStore& store, const std::string& experiment);

/// Run `run_id`'s artifact folder when `trust` accepts it (marked as htm's, or under
/// --artifacts), else why not: absent (no such run, no folder) or untrusted.
ArtifactPath artifact_folder(ResultsStore& store, int64_t run_id, const ArtifactTrust& trust);
/// The file `relative` in that folder, or why not: absent also when it is elsewhere (.., a link
/// out, an absolute path) or not a regular file.
inline ArtifactPath artifact_path(ResultsStore& store, int64_t run_id, const std::string& relative,
                                  const ArtifactTrust& trust) {
  return ArtifactTrust::file(artifact_folder(store, run_id, trust), relative);
}

}  // namespace serve

/// A running server: binds in the constructor (throws htm::Error naming the address), serves
/// in listen() until stop() (from another thread or a signal).
class Server {
 public:
  explicit Server(ServeOptions options);
  ~Server();
  int port() const;
  void listen();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace htm
