// A run's series read from the metrics table: whole once, and kept; for a run that trains, only the
// rows logged since, appended. See serve_series.h.
#include "web/serve_series.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <list>
#include <map>
#include <mutex>
#include <string_view>

#include "htm/error.h"
#include "store/results_store.h"
#include "web/serve.h"

namespace htm::serve {
namespace {

// One row (name, step, value, time, epoch, rowid, value IS NULL) counted, and its point added to
// `s` (after its last) where it has a value.
void add_row(RunSeries& out, Series* s, const Row& row) {
  ++out.rows;
  out.steps += row.integer(1);
  out.seen = std::max(out.seen, row.integer(5));
  if (s == nullptr) return;
  s->step.push_back(row.integer(1));
  s->value.push_back(row.real(2));
  s->time.push_back(row.real(3));
  s->epoch.push_back(row.real(4));
  s->epochs = s->epochs || !std::isnan(s->epoch.back());
  out.last = std::max(out.last, row.integer(5));
  ++out.points;
}

// metrics_by_series (run_id, split, name, step; rowid last) gives the rows in this order.
std::atomic<int64_t> whole_reads{0};

std::shared_ptr<const RunSeries> read_series(ResultsStore& store, int64_t run_id, double started) {
  ++whole_reads;
  auto out = std::make_shared<RunSeries>();
  out->started = started;
  store.scan(
      "SELECT split || '/' || name, step, value, time, epoch, rowid, value IS NULL FROM metrics "
      "WHERE run_id = ? ORDER BY split, name, step, rowid",
      {run_id}, [&out](const Row& row) {
        const bool value = row.integer(6) == 0;
        if (value && (out->series.empty() || out->series.back().metric != row.view(0)))
          out->series.push_back({row.text(0)});
        add_row(*out, value ? &out->series.back() : nullptr, row);
      });
  return out;
}

// The series of runs that no longer train, which do not change: a smoothing or a zoom reads no row
// again. Keyed by the run's uuid, status and end (the same run in two files has the same rows); at
// most kCachedPoints points in all, the least recently asked for dropped first.
class SeriesCache {
 public:
  static constexpr size_t kCachedPoints = 4'000'000;
  std::shared_ptr<const RunSeries> find(const std::string& key) {
    const std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);
        return it->second;
      }
    return nullptr;
  }
  void put(const std::string& key, std::shared_ptr<const RunSeries> series) {
    if (series->points > kCachedPoints) return;
    const std::lock_guard lock(mutex_);
    entries_.emplace_front(key, std::move(series));
    size_t points = 0;
    for (auto it = entries_.begin(); it != entries_.end();)
      if ((points += it->second->points) > kCachedPoints)
        it = entries_.erase(it);
      else
        ++it;
  }

 private:
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const RunSeries>>> entries_;
};
SeriesCache series_cache;

// Series in read_series' order: by split, then name (a metric is split/name, the split without '/').
bool by_split(std::string_view a, std::string_view b) {
  const size_t i = a.find('/'), j = b.find('/');
  const auto as = a.substr(0, i), bs = b.substr(0, j);
  return as != bs ? as < bs
                  : a.substr(i == std::string_view::npos ? a.size() : i + 1) <
                        b.substr(j == std::string_view::npos ? b.size() : j + 1);
}

// The series of runs that train, and so grow: a run page's poll every 2 s reads only the rows logged
// since the last (rowid > last), appended to a copy of what was read. Read whole again where that
// would not give what a whole read gives: rows gone since (a resumed run drops those after its
// checkpoint: their count or the sum of their steps, both read from the index, changes), a row at
// an earlier step than its series' last, or another start. (A resumed run whose new rows took the
// very rowids of the ones it dropped logs the same steps and values: only their times would be
// the old ones.) At most kLive runs.
class LiveSeries {
 public:
  static constexpr size_t kLive = 16;
  std::shared_ptr<const RunSeries> read(ResultsStore& store, int64_t run_id, double started) {
    std::shared_ptr<const RunSeries> had;
    {
      const std::lock_guard lock(mutex_);
      if (auto found = runs_.find(run_id); found != runs_.end() && found->second->started == started)
        had = found->second;
    }
    auto now = had ? grown(store, run_id, *had) : nullptr;
    if (!now) now = read_series(store, run_id, started);
    const std::lock_guard lock(mutex_);
    if (runs_.size() >= kLive && !runs_.count(run_id)) runs_.erase(runs_.begin());
    runs_[run_id] = now;
    return now;
  }

 private:
  static std::shared_ptr<const RunSeries> grown(ResultsStore& store, int64_t run_id, const RunSeries& had) {
    // The index alone answers (a row's value would be a read of the table for each row).
    const auto kept = store.query(
        "SELECT count(*), coalesce(sum(step), 0) FROM metrics WHERE run_id = ? AND rowid <= ?", {run_id, had.seen});
    if (kept.rows.empty() || std::stoll(kept.rows[0][0]) != had.rows || std::stoll(kept.rows[0][1]) != had.steps)
      return nullptr;
    auto out = std::make_shared<RunSeries>(had);
    bool in_order = true;
    store.scan(  // the file's rows after the last seen, by rowid (+run_id: not through the index's whole run)
        "SELECT split || '/' || name, step, value, time, epoch, rowid, value IS NULL FROM metrics "
        "WHERE rowid > ? AND +run_id = ? ORDER BY rowid",
        {had.seen, run_id}, [&](const Row& row) {
          if (!in_order) return;
          if (row.integer(6) != 0) return add_row(*out, nullptr, row);
          auto at = std::lower_bound(out->series.begin(), out->series.end(), row.view(0),
                                     [](const Series& s, std::string_view m) { return by_split(s.metric, m); });
          if (at == out->series.end() || at->metric != row.view(0)) at = out->series.insert(at, Series{row.text(0)});
          if (!at->step.empty() && row.integer(1) < at->step.back()) {
            in_order = false;  // an earlier step: a whole read puts it in its place
            return;
          }
          add_row(*out, &*at, row);
        });
    return in_order ? out : nullptr;
  }
  std::mutex mutex_;
  std::map<int64_t, std::shared_ptr<const RunSeries>> runs_;
};
LiveSeries live_series;

}  // namespace

std::shared_ptr<const RunSeries> run_series(ResultsStore& store, int64_t run_id) {
  const auto run = store.query(
      "SELECT coalesce(uuid, ''), status, coalesce(ended_at, ''), printf('%.3f', coalesce(started_at, 0)) "
      "FROM runs WHERE id = ?",
      {run_id});
  if (run.rows.empty()) throw NotFound("no run " + std::to_string(run_id) + " in this database");
  const auto& r = run.rows[0];
  const double started = std::stod(r[3]);
  if (r[1] == "running") return live_series.read(store, run_id, started);
  if (r[0].empty()) return read_series(store, run_id, started);
  const std::string key = r[0] + "\n" + r[1] + "\n" + r[2];
  if (auto hit = series_cache.find(key)) return hit;
  auto series = read_series(store, run_id, started);
  series_cache.put(key, series);
  return series;
}

int64_t whole_series_reads() { return whole_reads; }

}  // namespace htm::serve
