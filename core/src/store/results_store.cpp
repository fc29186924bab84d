#include "store/results_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include "htm/error.h"
#include "store/sqlite.h"

namespace htm {
namespace {

using store::enable_wal;
using store::fail;
using store::kBusyTimeoutMs;
using store::kSchemaVersion;
using store::now_seconds;
using store::run_sql;
using store::Statement;
using store::Transaction;

// The whole schema; every statement is idempotent so any process may open a fresh file.
// docs/results.md describes each table and view: keep the two in step.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS experiments (
  id         INTEGER PRIMARY KEY,
  name       TEXT UNIQUE NOT NULL,
  created_at REAL
);
CREATE TABLE IF NOT EXISTS runs (
  id            INTEGER PRIMARY KEY,
  uuid          TEXT UNIQUE NOT NULL,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  variant       TEXT,
  seed          INTEGER,
  status        TEXT NOT NULL
                CHECK (status IN ('running', 'finished', 'failed', 'interrupted', 'killed')),
  started_at    REAL,
  ended_at      REAL,
  source_file   TEXT,
  config_toml   TEXT,
  config_hash   TEXT,
  git_revision  TEXT,
  torch_version TEXT,
  htm_version   TEXT,
  host          TEXT,
  artifact_dir  TEXT,
  error         TEXT,
  owner_host    TEXT,
  owner_pid     INTEGER,
  owner_start   INTEGER,
  heartbeat_at  REAL,
  resumes       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_identity ON runs(experiment_id, variant, seed, config_hash);
CREATE TABLE IF NOT EXISTS run_plugins (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind    TEXT NOT NULL,
  name    TEXT NOT NULL,
  version TEXT,
  path    TEXT,
  sha256  TEXT,
  PRIMARY KEY (run_id, kind, name)
);
CREATE TABLE IF NOT EXISTS params (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL,
  value  TEXT,
  PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  epoch  INTEGER,
  split  TEXT NOT NULL,
  name   TEXT NOT NULL,
  value  REAL,
  time   REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_by_series ON metrics(run_id, split, name, step);
CREATE TABLE IF NOT EXISTS artifacts (
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind       TEXT NOT NULL,
  path       TEXT NOT NULL,
  step       INTEGER,
  created_at REAL
);
CREATE INDEX IF NOT EXISTS artifacts_by_run ON artifacts(run_id);
CREATE TABLE IF NOT EXISTS tags (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key    TEXT NOT NULL,
  value  TEXT,
  PRIMARY KEY (run_id, key)
);
CREATE VIEW IF NOT EXISTS latest_metrics AS
SELECT run_id, split, name, step, epoch, value FROM (
  SELECT run_id, split, name, step, epoch, value,
         row_number() OVER (PARTITION BY run_id, split, name
                            ORDER BY step DESC, time DESC, rowid DESC) AS position
  FROM metrics)
WHERE position = 1;
CREATE VIEW IF NOT EXISTS run_summary AS
SELECT r.id AS id, e.name AS experiment, r.variant AS variant, r.seed AS seed,
       r.status AS status, datetime(r.started_at, 'unixepoch') AS started_at,
       round(r.ended_at - r.started_at, 1) AS duration_s, r.error AS error
FROM runs r JOIN experiments e ON e.id = r.experiment_id;
)sql";

// 128 random bits as 32 hex digits. random_device reads the OS on every call, so processes
// forked from one parent still get distinct ids.
std::string random_uuid() {
  std::random_device device;
  std::string uuid;
  char word[9];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(device()));
    uuid += word;
  }
  return uuid;
}

void require_run(sqlite3* db, const std::string& path, int64_t run_id) {
  Statement find(db, path, "SELECT 1 FROM runs WHERE id = ?");
  if (!find.bind_int(1, run_id).step()) fail(path, "no run with id " + std::to_string(run_id));
}

// The runs table as kSchema defines it, created under another name (the v1 → v2 rebuild).
std::string runs_table_as(const std::string& name) {
  const std::string schema = kSchema, head = "CREATE TABLE IF NOT EXISTS runs (";
  const size_t begin = schema.find(head), end = schema.find("\n);", begin);
  return "CREATE TABLE " + name + " (" + schema.substr(begin + head.size(), end - begin - head.size()) + "\n);";
}

// Version 1 → 2: 'killed' joins the statuses (a CHECK, so the table is rebuilt, SQLite's
// documented way), runs gain their owner and heartbeat, run_plugins the library's path and hash.
constexpr const char* kMigrateFrom1 = R"sql(
DROP VIEW IF EXISTS run_summary;
INSERT INTO runs_v2(id, uuid, experiment_id, variant, seed, status, started_at, ended_at,
                    source_file, config_toml, config_hash, git_revision, torch_version,
                    htm_version, host, artifact_dir, error)
  SELECT id, uuid, experiment_id, variant, seed, status, started_at, ended_at, source_file,
         config_toml, config_hash, git_revision, torch_version, htm_version, host,
         artifact_dir, error FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
ALTER TABLE run_plugins ADD COLUMN path TEXT;
ALTER TABLE run_plugins ADD COLUMN sha256 TEXT;
UPDATE meta SET value = '2' WHERE key = 'schema_version';
)sql";

}  // namespace

const char* status_name(RunStatus status) {
  switch (status) {
    case RunStatus::running:
      return "running";
    case RunStatus::finished:
      return "finished";
    case RunStatus::failed:
      return "failed";
    case RunStatus::interrupted:
      return "interrupted";
    case RunStatus::killed:
      return "killed";
  }
  return "unknown";
}

ResultsStore::ResultsStore(const std::string& path, OpenMode mode) : path_(path), mode_(mode) {
  const bool read_only = mode_ == OpenMode::read_only;
  std::error_code ec;
  if (read_only && path_ != ":memory:" && !std::filesystem::is_regular_file(path_, ec))
    fail(path_, "no such database (nothing has been recorded there yet)");
  if (!read_only && path_ != ":memory:") {
    std::filesystem::path parent = std::filesystem::path(path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) fail(path_, "cannot create directory '" + parent.string() + "': " + ec.message());
  }
  int rc = sqlite3_open_v2(path_.c_str(), &db_,
                           read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  try {
    if (rc != SQLITE_OK) fail(path_, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    if (read_only) {
      // A WAL database on read-only media cannot create its -shm file: read it as immutable.
      if (sqlite3_exec(db_, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) != SQLITE_OK) {
        sqlite3_close_v2(db_);
        db_ = nullptr;
        const std::string uri = "file:" + path_ + "?immutable=1";
        if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK)
          fail(path_, db_ ? sqlite3_errmsg(db_) : "cannot open it read-only");
      }
      exec("PRAGMA query_only=1");
      check_identity();
      const int found = stored_version();
      if (found != kSchemaVersion) {
        if (found == 1 && access(path_.c_str(), W_OK) == 0) {  // upgrade once, then read
          sqlite3_close_v2(db_);
          db_ = nullptr;
          { ResultsStore upgrade(path_); }
          ResultsStore reopened(path_, OpenMode::read_only);
          std::swap(db_, reopened.db_);
          return;
        }
        fail(path_, found == 0 ? std::string("holds no htm results yet")
                               : "schema version " + std::to_string(found) + " is not the version " +
                                     std::to_string(kSchemaVersion) + " this htm understands");
      }
      return;
    }
    exec("PRAGMA busy_timeout=" + std::to_string(kBusyTimeoutMs));
    check_identity();
    enable_wal(db_, path_);
    exec("PRAGMA synchronous=NORMAL");
    if (stored_version() == 1) migrate(1);
    exec("PRAGMA foreign_keys=ON");

    Transaction transaction(db_, path_);
    exec(kSchema);
    exec(kAnnotationSchema);  // store/annotations.h: what people add from htm serve's pages
    Statement(db_, path_, "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)")
        .bind_text(1, std::to_string(kSchemaVersion))
        .run();
    Statement version(db_, path_, "SELECT value FROM meta WHERE key = 'schema_version'");
    int found = version.step() ? std::atoi(version.column_text(0).c_str()) : 0;
    if (found != kSchemaVersion) {
      fail(path_, "schema version " + std::to_string(found) + " is not the version " + std::to_string(kSchemaVersion) +
                      " this htm understands");
    }
    transaction.commit();
  } catch (...) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

// An empty file, or one with htm's meta table, is ours; anything else is another program's
// database, and htm neither adds tables to it nor switches its journal.
void ResultsStore::check_identity() {
  Statement tables(db_, path_, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  std::string names;
  bool meta = false;
  while (tables.step()) {
    const std::string name = tables.column_text(0);
    meta |= name == "meta";
    if (names.size() < 80) names += (names.empty() ? "" : ", ") + name;
  }
  if (names.empty()) return;
  if (meta) {
    Statement version(db_, path_, "SELECT 1 FROM meta WHERE key = 'schema_version'");
    if (version.step()) return;
  }
  fail(path_, "not an htm results database: it has tables (" + names +
                  ") but no htm schema_version in a meta table; htm leaves it unchanged (name another file with --db)");
}

int ResultsStore::stored_version() {
  Statement meta(db_, path_, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'");
  if (!meta.step()) return 0;
  Statement version(db_, path_, "SELECT value FROM meta WHERE key = 'schema_version'");
  return version.step() ? std::atoi(version.column_text(0).c_str()) : 0;
}

void ResultsStore::migrate(int from_version) {
  Transaction transaction(db_, path_);
  if (stored_version() != from_version) return;  // another process upgraded it meanwhile
  exec(runs_table_as("runs_v2"));
  exec(kMigrateFrom1);
  transaction.commit();
}

ResultsStore::~ResultsStore() {
  if (db_) sqlite3_close_v2(db_);
}

void ResultsStore::set_busy_timeout(int milliseconds) { sqlite3_busy_timeout(db_, milliseconds); }

void ResultsStore::exec(const std::string& sql) { run_sql(db_, path_, sql.c_str()); }

int64_t ResultsStore::begin_run(const RunInfo& info) {
  Transaction transaction(db_, path_);
  const int64_t run_id = insert_run(info, RunOwner::self());
  transaction.commit();
  return run_id;
}

int64_t ResultsStore::insert_run(const RunInfo& info, const RunOwner& owner) {
  double now = now_seconds();
  Statement(db_, path_, "INSERT OR IGNORE INTO experiments(name, created_at) VALUES (?, ?)")
      .bind_text(1, info.experiment)
      .bind_real(2, now)
      .run();

  Statement insert(db_, path_,
                   "INSERT INTO runs(uuid, experiment_id, variant, seed, status, started_at, "
                   "source_file, config_toml, config_hash, git_revision, torch_version, "
                   "htm_version, host, artifact_dir, owner_host, owner_pid, owner_start, heartbeat_at) "
                   "SELECT ?, id, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
                   "FROM experiments WHERE name = ?");
  insert.bind_text(1, random_uuid())
      .bind_text(2, info.variant)
      .bind_int(3, info.seed)
      .bind_real(4, now)
      .bind_text_or_null(5, info.source_file)
      .bind_text(6, info.config_toml)
      .bind_text(7, info.config_hash)
      .bind_text_or_null(8, info.git_revision)
      .bind_text_or_null(9, info.torch_version)
      .bind_text_or_null(10, info.htm_version)
      .bind_text_or_null(11, info.host)
      .bind_text_or_null(12, info.artifact_dir)
      .bind_text(13, owner.host)
      .bind_int(14, owner.pid)
      .bind_int(15, owner.start)
      .bind_real(16, now)
      .bind_text(17, info.experiment)
      .run();
  int64_t run_id = sqlite3_last_insert_rowid(db_);

  Statement param(db_, path_, "INSERT INTO params(run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : info.params) {
    param.bind_int(1, run_id).bind_text(2, key).bind_text(3, to_toml(value)).run();
  }
  // One plugin may fill several slots (merge and unmerge); it is recorded once.
  Statement plugin(db_, path_,
                   "INSERT OR IGNORE INTO run_plugins(run_id, kind, name, version, path, sha256) "
                   "VALUES (?, ?, ?, ?, ?, ?)");
  for (const auto& p : info.plugins) {
    plugin.bind_int(1, run_id).bind_text(2, p.kind).bind_text(3, p.name).bind_text(4, p.version);
    plugin.bind_text_or_null(5, p.path).bind_text_or_null(6, p.sha256).run();
  }
  return run_id;
}

void ResultsStore::log_metrics(int64_t run_id, int64_t step, int64_t epoch, const std::string& split,
                               const std::vector<Metric>& metrics, bool replace) {
  if (metrics.empty()) return;
  Transaction transaction(db_, path_);
  require_run(db_, path_, run_id);
  if (replace) {
    Statement drop(db_, path_, "DELETE FROM metrics WHERE run_id = ? AND step = ? AND split = ? AND name = ?");
    for (const auto& metric : metrics)
      drop.bind_int(1, run_id).bind_int(2, step).bind_text(3, split).bind_text(4, metric.name).run();
  }
  // SQLite has no NaN: binding one stores NULL, which docs/results.md explains.
  Statement insert(db_, path_,
                   "INSERT INTO metrics(run_id, step, epoch, split, name, value, time) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)");
  double now = now_seconds();
  for (const auto& metric : metrics) {
    insert.bind_int(1, run_id).bind_int(2, step).bind_int(3, epoch).bind_text(4, split);
    insert.bind_text(5, metric.name).bind_real(6, metric.value).bind_real(7, now).run();
  }
  transaction.commit();
}

void ResultsStore::add_artifact(int64_t run_id, const std::string& kind, const std::string& path, int64_t step) {
  Transaction transaction(db_, path_);
  require_run(db_, path_, run_id);
  // One row per file: a resumed run that writes a picture again does not list it twice.
  Statement(db_, path_, "DELETE FROM artifacts WHERE run_id = ? AND path = ?")
      .bind_int(1, run_id)
      .bind_text(2, path)
      .run();
  Statement(db_, path_, "INSERT INTO artifacts(run_id, kind, path, step, created_at) VALUES (?, ?, ?, ?, ?)")
      .bind_int(1, run_id)
      .bind_text(2, kind)
      .bind_text(3, path)
      .bind_int(4, step)
      .bind_real(5, now_seconds())
      .run();
  transaction.commit();
}

void ResultsStore::set_tags(int64_t run_id, const std::map<std::string, std::string>& tags) {
  if (tags.empty()) return;
  Transaction transaction(db_, path_);
  require_run(db_, path_, run_id);
  Statement insert(db_, path_, "INSERT OR REPLACE INTO tags(run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : tags) insert.bind_int(1, run_id).bind_text(2, key).bind_text(3, value).run();
  transaction.commit();
}

void ResultsStore::finish_run(int64_t run_id, RunStatus status, const std::string& error) {
  Transaction transaction(db_, path_);
  Statement update(db_, path_, "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE id = ?");
  update.bind_text(1, status_name(status));
  if (status == RunStatus::running) {
    update.bind_null(2);  // a running run has no end yet
  } else {
    update.bind_real(2, now_seconds());
  }
  update.bind_text_or_null(3, error).bind_int(4, run_id).run();
  if (sqlite3_changes(db_) == 0) fail(path_, "no run with id " + std::to_string(run_id));
  transaction.commit();
}

std::optional<int64_t> ResultsStore::find_finished(const std::string& experiment, const std::string& variant,
                                                   int64_t seed, const std::string& config_hash) {
  Statement find(db_, path_,
                 "SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id "
                 "WHERE e.name = ? AND r.variant = ? AND r.seed = ? AND r.config_hash = ? "
                 "AND r.status = 'finished' ORDER BY r.id DESC LIMIT 1");
  find.bind_text(1, experiment).bind_text(2, variant).bind_int(3, seed).bind_text(4, config_hash);
  if (!find.step()) return std::nullopt;
  return find.column_int(0);
}

}  // namespace htm
