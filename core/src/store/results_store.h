// SQLite results store: experiments, runs, params, metrics, artifacts (schema in docs/results.md).
// results_store.cpp writes and reads runs, merge.cpp imports another database, sqlite.h wraps
// the C API.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "htm/error.h"
#include "htm/value.h"
#include "store/annotations.h"
#include "store/metric.h"

struct sqlite3;
struct sqlite3_stmt;

namespace htm {

enum class RunStatus { running, finished, failed, interrupted, killed };

/// The database file is malformed (SQLITE_CORRUPT or SQLITE_NOTADB). Nothing more may be written
/// to it: a run that meets it checkpoints and stops (docs/reliability.md).
class DatabaseCorrupt : public Error {
 public:
  using Error::Error;
};
const char* status_name(RunStatus status);

/// How a store is opened: commands that only read (runs, query, compare) open it read-only,
/// which also works on read-only media and never changes the file.
enum class OpenMode { read_write, read_only };

struct PluginVersion {
  std::string kind, name, version;
  std::string path;    ///< the library file that ran (empty: not recorded)
  std::string sha256;  ///< of that file
};

/// The process that owns a running run: host name, pid and the pid's start time (clock ticks
/// since boot, /proc/PID/stat), so a reused pid is not mistaken for the owner.
struct RunOwner {
  std::string host;
  int64_t pid = 0;
  int64_t start = 0;
  static RunOwner self();
  static RunOwner of(int64_t pid);  ///< a process of this host
};

/// Whether the owner of a running run is still there: on this host, its pid runs with the same
/// start time; on another host, its heartbeat is younger than kHeartbeatTimeoutS.
bool owner_alive(const RunOwner& owner, double heartbeat_at, double now);
inline constexpr double kHeartbeatTimeoutS = 600;
/// A run whose process crashed this many times at the same step is not resumed automatically.
inline constexpr int64_t kCrashesHeld = 2;

/// What claim_run() found for a run's identity (experiment, variant, seed, config hash).
struct Claim {
  enum class Outcome {
    started,   ///< a new row, owned by this process
    resumed,   ///< an unfinished row (interrupted or killed), now owned by this process
    finished,  ///< already finished: nothing to do
    taken,     ///< running under a live owner: another process's work
    held,      ///< crashed kCrashesHeld times at one step: resumed only when asked (htm resume --force);
               ///< or its artifact folder is not one htm wrote here (folder_refused): not resumed
  };
  Outcome outcome = Outcome::started;
  int64_t run_id = 0;
  std::string artifact_dir;  ///< the row's artifact folder (resumed: where its checkpoint is)
  std::string detail;        ///< taken: the owner ("host h pid p"); resumed: the status it had; held: why
  /// Held because its artifact folder is not one htm wrote here (artifact_trust.h; detail: why).
  bool folder_refused = false;
};

/// Everything recorded when a run starts.
struct RunInfo {
  std::string experiment;   ///< experiment name (from the file's [experiment] name)
  std::string source_file;  ///< path of the experiment file
  std::string variant;
  int64_t seed = 0;
  std::string config_toml;  ///< the fully resolved config
  std::string config_hash;  ///< hash of config_toml; with experiment/variant/seed identifies a run
  std::string git_revision;
  std::string torch_version;
  std::string htm_version;
  std::string host;
  std::string artifact_dir;
  std::map<std::string, Value> params;  ///< flattened resolved config ("train.lr" -> 0.0001)
  std::vector<PluginVersion> plugins;
};

/// What recover_file() brought over.
struct RecoveryReport {
  std::vector<std::pair<std::string, int64_t>> rows;  ///< per table: rows SQLite could still read
  std::vector<std::string> lost;                      ///< per damaged table: the rowids skipped
  int64_t runs = 0;                                   ///< runs in the new file
};

/// SQL for one cell of the latest row of a run's metric: latest_metrics' row (the highest step,
/// then time, then rowid), found by the metrics_by_series index, since that view joined to the
/// runs ranks the whole table. `cell` is read from the row (alias l), `run` is the run id's SQL,
/// and the metric's split and name are bound to its two ?s, in that order.
inline std::string latest_metric_sql(const std::string& cell, const std::string& run) {
  return "(SELECT " + cell + " FROM metrics l WHERE l.run_id = " + run +
         " AND l.split = ? AND l.name = ? ORDER BY l.step DESC, l.time DESC, l.rowid DESC LIMIT 1)";
}

/// One row of ResultsStore::scan(), its cells typed as stored; valid only inside the callback.
class Row {
 public:
  explicit Row(sqlite3_stmt* stmt) : stmt_(stmt) {}
  int64_t integer(int column) const;
  double real(int column) const;  ///< NULL: NaN
  std::string text(int column) const;
  std::string_view view(int column) const;  ///< text() without a copy: valid until the next row

 private:
  sqlite3_stmt* stmt_;
};

/// Result of an arbitrary query, every cell rendered as text (NULL as "").
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

/// A value bound to a `?` of a query: user input never becomes SQL text.
using SqlValue = std::variant<int64_t, double, std::string>;

/// One open database. Safe to use from several processes at once (WAL + busy timeout);
/// an instance is not shared between threads.
class ResultsStore {
 public:
  /// Opens or creates the database and its schema (read_only: opens an existing one, never
  /// writes). Refuses a file that holds another application's tables. Throws htm::Error with
  /// the path on failure.
  explicit ResultsStore(const std::string& path, OpenMode mode = OpenMode::read_write);
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  /// Records a new run with status `running`, owned by this process; returns its id.
  int64_t begin_run(const RunInfo& info);
  /// Atomically takes the work of one run identity for this process: a finished run is left
  /// alone (unless `force`), a running one with a live owner is someone else's, an unfinished
  /// one (interrupted, killed, or running under a dead owner, which is first recorded killed)
  /// is resumed, and otherwise a new row is begun from `info`. A run whose process crashed
  /// (record_crash) is resumed too, unless it crashed kCrashesHeld times at one step: then it
  /// is `held`, unless `retry_crashed`. A run to resume whose artifact folder ArtifactTrust
  /// does not accept is `held` with folder_refused, `retry_crashed` or not, its row left as it was.
  Claim claim_run(const RunInfo& info, bool force, bool retry_crashed = false);
  /// A supervisor's record of a run whose process (`owner_pid`) died by a signal at `step`:
  /// failed with `message`, and the tags `crashes` (how many times in a row at this step) and
  /// `crash_step`. Does nothing when the run is no longer running under that process. Returns
  /// the crash count (0: nothing recorded).
  int64_t record_crash(int64_t run_id, int64_t owner_pid, int64_t step, const std::string& message);
  /// The same for a data-parallel rank that crashed, once all the run's ranks have ended: the
  /// run (claimed by rank 0, `owner_pid`) is failed with `message` also when rank 0 recorded an
  /// outcome of its own after the crash (failed: the other ranks failed; interrupted: it was
  /// stopped), whose text then follows the message. A finished run is left alone.
  int64_t record_rank_crash(int64_t run_id, int64_t owner_pid, int64_t step, const std::string& message);
  /// A supervisor's record of a run it stopped on a signal (its process did not stop in time and
  /// was killed, or ended without recording): `interrupted` with `message`, resumable. Does
  /// nothing when the run is no longer running under `owner_pid`; whether it recorded.
  bool record_interrupted(int64_t run_id, int64_t owner_pid, const std::string& message);
  /// Refreshes the owner's heartbeat; throws htm::Error when the run is no longer this
  /// process's (another process settled it as killed and took it over).
  void heartbeat(int64_t run_id);
  /// Records `killed` for every running run whose owner is gone; returns their ids.
  std::vector<int64_t> settle_stale();
  /// Ids of running runs whose owner is gone (what settle_stale() would record).
  std::vector<int64_t> stale_runs();
  /// Drops the metrics and artifacts a run logged after `step`: a resumed run logs them again.
  void truncate_after(int64_t run_id, int64_t step);
  /// Appends metrics of one step in one transaction. With `replace`, rows of the same run, split,
  /// name and step go first: what a run logs after its last checkpoint (at the final step, which
  /// truncate_after() keeps) is logged once however often a resume repeats it.
  void log_metrics(int64_t run_id, int64_t step, int64_t epoch, const std::string& split,
                   const std::vector<Metric>& metrics, bool replace = false);
  /// Lists a file the run wrote (one row per path: writing it again replaces the row).
  void add_artifact(int64_t run_id, const std::string& kind, const std::string& path, int64_t step);
  /// Stores `tags` on the run (the tags table), replacing values of the same keys.
  void set_tags(int64_t run_id, const std::map<std::string, std::string>& tags);
  /// Sets the final status, end time and (for failures) the error message.
  void finish_run(int64_t run_id, RunStatus status, const std::string& error = "");
  /// Id of a finished run with this identity, if any (lets a sweep skip what is done).
  std::optional<int64_t> find_finished(const std::string& experiment, const std::string& variant, int64_t seed,
                                       const std::string& config_hash);
  /// Runs one SQL statement with `params` bound to its `?`s in order; throws htm::Error
  /// carrying SQLite's message on failure, or when more than one statement is given. Unless
  /// `allow_write`, a statement that could change a database (also ATTACH, DETACH, VACUUM
  /// INTO, a PRAGMA that sets) is refused.
  QueryResult query(const std::string& sql, const std::vector<SqlValue>& params = {}, bool allow_write = false);
  /// query() for many rows: calls `each` per row with its typed cells, never rendering them
  /// as text (a study's millions of metric rows); reads only.
  void scan(const std::string& sql, const std::vector<SqlValue>& params, const std::function<void(const Row&)>& each);
  /// Every metric the runs logged, as "split/name", sorted: one index seek per run and series,
  /// not a read of every row (a 200-run study's 800,000 rows).
  std::vector<std::string> metric_names(const std::vector<int64_t>& runs);
  /// Copies every run of another database that this one lacks (matched by run uuid), except
  /// runs still running there (a shard being written: a later merge takes them once they end).
  /// Returns the number of runs imported; `still_running` gets the number left behind.
  int64_t merge_from(const std::string& other_path, int64_t* still_running = nullptr);

  // What people add to runs from htm serve's pages (store/annotations.h), in tables of their own.
  // Each write is one short transaction (BEGIN IMMEDIATE ... COMMIT). A value that annotations.h's
  // *_problem() names is refused (htm::Error); a run that is not there: false, nothing written.
  bool set_note(int64_t run_id, const std::string& text);  ///< "" empties it (kept, so a merge carries that)
  bool set_user_tag(int64_t run_id, const std::string& key, const std::string& value);
  bool remove_user_tag(int64_t run_id, const std::string& key);
  bool set_archived(int64_t run_id, bool archived);
  void save_view(const std::string& name, const std::string& state);  ///< replaces one of that name
  bool delete_view(const std::string& name);                          ///< false: there was none
  /// Whether the file has the annotation tables: one that no read-write open of this htm touched
  /// lacks them, and then no run has any (the reads below answer so).
  bool has_annotations();
  /// The annotations of `runs` (absent from the map: none at all).
  std::map<int64_t, RunAnnotations> annotations(const std::vector<int64_t>& runs);
  std::vector<SavedView> saved_views();  ///< by name

  /// How long a write waits for another process's lock before failing (30 s by default). A
  /// training run waits longer: it would rather pause than fail for someone's open shell.
  void set_busy_timeout(int milliseconds);

  const std::string& path() const { return path_; }

  /// SQLite's own check of an existing file, opened read-only: PRAGMA quick_check (every page
  /// read once: about 6 ms per MB here), or with `full` integrity_check (also every index against
  /// its table). Returns its complaints, at most `limit`; none when the file is sound, empty or
  /// absent. A file SQLite cannot read at all is one complaint.
  static std::vector<std::string> check_file(const std::string& path, bool full = false, int limit = 20);
  /// check_file(), quick, before a command's first write: throws htm::Error with the first
  /// complaint and what to do when the file is malformed.
  static void require_sound(const std::string& path);
  /// Reads what SQLite can still read of a damaged database (table by table, skipping the rows
  /// of unreadable pages) into the new htm database `out`, via merge_from(); a run that was
  /// `running` becomes `killed`, and every run is tagged `recovered`. Refuses an existing `out`.
  static RecoveryReport recover_file(const std::string& damaged, const std::string& out);

 private:
  void exec(const std::string& sql);
  /// `sql` prepared with `params` bound, after query()'s checks (one statement, read-only unless allowed).
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> prepare(const std::string& sql,
                                                                const std::vector<SqlValue>& params, bool allow_write);
  void check_identity();
  int stored_version();  ///< meta's schema_version; 0 when there is none
  void migrate(int from_version);
  int64_t insert_run(const RunInfo& info, const RunOwner& owner);
  void merge_annotations();  ///< merge_from's step for the annotation tables (annotations.cpp)
  int64_t crash(int64_t run_id, int64_t owner_pid, int64_t step, const std::string& message, bool over_own_outcome);
  std::string path_;
  OpenMode mode_;
  sqlite3* db_ = nullptr;
};

}  // namespace htm
