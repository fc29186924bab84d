#include "results_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>
#include <thread>

#include "htm/error.h"

namespace htm {
namespace {

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 30000;

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
                CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
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
  error         TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_identity ON runs(experiment_id, variant, seed, config_hash);
CREATE TABLE IF NOT EXISTS run_plugins (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind    TEXT NOT NULL,
  name    TEXT NOT NULL,
  version TEXT,
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
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '1');
)sql";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw Error("results database '" + path + "': " + message);
}

void run_sql(sqlite3* db, const std::string& path, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    fail(path, text);
  }
}

// Switching a file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once,
// without the busy handler, while another process is opening the same fresh file: retry.
void enable_wal(sqlite3* db, const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline) {
      fail(path, sqlite3_errmsg(db));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// A prepared statement that finalizes itself; errors name the database.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      fail(path, sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind_int(int index, int64_t value) {
    check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  Statement& bind_real(int index, double value) {
    check(sqlite3_bind_double(stmt_, index, value));
    return *this;
  }
  Statement& bind_text(int index, const std::string& value) {
    check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind_null(int index) {
    check(sqlite3_bind_null(stmt_, index));
    return *this;
  }
  /// Empty text is stored as NULL: "not recorded" reads better in SQL as `IS NULL`.
  Statement& bind_text_or_null(int index, const std::string& value) {
    return value.empty() ? bind_null(index) : bind_text(index, value);
  }

  /// Advances; true while a row is available.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(path_, sqlite3_errmsg(db_));
  }
  /// Runs a statement that returns no rows, then readies it for new bindings.
  void run() {
    step();
    sqlite3_reset(stmt_);
  }
  int64_t column_int(int index) { return sqlite3_column_int64(stmt_, index); }
  std::string column_text(int index) {
    auto text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
    return text ? text : "";
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(path_, sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// BEGIN IMMEDIATE takes the write lock up front, so concurrent writers wait on the busy
/// timeout instead of failing when a read transaction cannot be upgraded.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {
    run_sql(db_, path_, "BEGIN IMMEDIATE");
  }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    run_sql(db_, path_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool committed_ = false;
};

void require_run(sqlite3* db, const std::string& path, int64_t run_id) {
  Statement find(db, path, "SELECT 1 FROM runs WHERE id = ?");
  if (!find.bind_int(1, run_id).step()) fail(path, "no run with id " + std::to_string(run_id));
}

std::string cell_text(sqlite3_stmt* stmt, int index) {
  char buffer[64];
  switch (sqlite3_column_type(stmt, index)) {
    case SQLITE_NULL:
      return "";
    case SQLITE_INTEGER:
      std::snprintf(buffer, sizeof buffer, "%lld",
                    static_cast<long long>(sqlite3_column_int64(stmt, index)));
      return buffer;
    case SQLITE_FLOAT:
      std::snprintf(buffer, sizeof buffer, "%.6g", sqlite3_column_double(stmt, index));
      return buffer;
    case SQLITE_BLOB:
      return "<" + std::to_string(sqlite3_column_bytes(stmt, index)) + "-byte blob>";
    default:
      return reinterpret_cast<const char*>(sqlite3_column_text(stmt, index));
  }
}

// What query() prints for integers and %.6g reals: sign, digits, point, exponent, or inf.
bool looks_numeric(const std::string& text) {
  size_t i = 0, n = text.size();
  if (i < n && (text[i] == '-' || text[i] == '+')) ++i;
  if (text.compare(i, std::string::npos, "inf") == 0) return true;
  size_t digits = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < n && text[i] == '.') {
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '-' || text[i] == '+')) ++i;
    size_t exponent_digits = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == n;
}

// Columns are measured in code points, so UTF-8 names line up.
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

// One line per row: line breaks and tabs inside a cell would break the alignment.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

}  // namespace

const char* status_name(RunStatus status) {
  switch (status) {
    case RunStatus::running: return "running";
    case RunStatus::finished: return "finished";
    case RunStatus::failed: return "failed";
    case RunStatus::interrupted: return "interrupted";
  }
  return "unknown";
}

std::string format_table(const QueryResult& result) {
  if (result.rows.empty()) return "(no rows)\n";
  size_t count = result.columns.size();
  std::vector<size_t> widths(count);
  std::vector<bool> numeric(count, true);
  for (size_t c = 0; c < count; ++c) widths[c] = display_width(one_line(result.columns[c]));
  for (const auto& row : result.rows) {
    for (size_t c = 0; c < count && c < row.size(); ++c) {
      widths[c] = std::max(widths[c], display_width(one_line(row[c])));
      if (!row[c].empty() && !looks_numeric(row[c])) numeric[c] = false;
    }
  }

  std::string out;
  auto add_line = [&](auto cell_of) {
    std::string line;
    for (size_t c = 0; c < count; ++c) {
      std::string text = one_line(cell_of(c));
      std::string padding(widths[c] - display_width(text), ' ');
      if (c > 0) line += "  ";
      line += numeric[c] ? padding + text : text + padding;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  add_line([&](size_t c) { return result.columns[c]; });
  add_line([&](size_t c) { return std::string(widths[c], '-'); });
  for (const auto& row : result.rows) {
    add_line([&](size_t c) { return c < row.size() ? row[c] : std::string(); });
  }
  return out;
}

ResultsStore::ResultsStore(const std::string& path) : path_(path) {
  if (path_ != ":memory:") {
    std::filesystem::path parent = std::filesystem::path(path_).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) fail(path_, "cannot create directory '" + parent.string() + "': " + ec.message());
  }
  int rc = sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                           nullptr);
  try {
    if (rc != SQLITE_OK) fail(path_, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    exec("PRAGMA busy_timeout=" + std::to_string(kBusyTimeoutMs));
    enable_wal(db_, path_);
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=ON");

    Transaction transaction(db_, path_);
    exec(kSchema);
    Statement version(db_, path_, "SELECT value FROM meta WHERE key = 'schema_version'");
    int found = version.step() ? std::atoi(version.column_text(0).c_str()) : 0;
    if (found != kSchemaVersion) {
      fail(path_, "schema version " + std::to_string(found) + " is not the version " +
                      std::to_string(kSchemaVersion) + " this htm understands");
    }
    transaction.commit();
  } catch (...) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

ResultsStore::~ResultsStore() {
  if (db_) sqlite3_close_v2(db_);
}

void ResultsStore::exec(const std::string& sql) { run_sql(db_, path_, sql.c_str()); }

int64_t ResultsStore::begin_run(const RunInfo& info) {
  Transaction transaction(db_, path_);
  double now = now_seconds();
  Statement(db_, path_, "INSERT OR IGNORE INTO experiments(name, created_at) VALUES (?, ?)")
      .bind_text(1, info.experiment)
      .bind_real(2, now)
      .run();

  Statement insert(db_, path_,
                   "INSERT INTO runs(uuid, experiment_id, variant, seed, status, started_at, "
                   "source_file, config_toml, config_hash, git_revision, torch_version, "
                   "htm_version, host, artifact_dir) "
                   "SELECT ?, id, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ? "
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
      .bind_text(13, info.experiment)
      .run();
  int64_t run_id = sqlite3_last_insert_rowid(db_);

  Statement param(db_, path_, "INSERT INTO params(run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : info.params) {
    param.bind_int(1, run_id).bind_text(2, key).bind_text(3, to_toml(value)).run();
  }
  // One plugin may fill several slots (merge and unmerge); it is recorded once.
  Statement plugin(db_, path_,
                   "INSERT OR IGNORE INTO run_plugins(run_id, kind, name, version) "
                   "VALUES (?, ?, ?, ?)");
  for (const auto& p : info.plugins) {
    plugin.bind_int(1, run_id).bind_text(2, p.kind).bind_text(3, p.name).bind_text(4, p.version);
    plugin.run();
  }
  transaction.commit();
  return run_id;
}

void ResultsStore::log_metrics(int64_t run_id, int64_t step, int64_t epoch,
                               const std::string& split, const std::vector<Metric>& metrics) {
  if (metrics.empty()) return;
  Transaction transaction(db_, path_);
  require_run(db_, path_, run_id);
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

void ResultsStore::add_artifact(int64_t run_id, const std::string& kind, const std::string& path,
                                int64_t step) {
  Transaction transaction(db_, path_);
  require_run(db_, path_, run_id);
  Statement(db_, path_,
            "INSERT INTO artifacts(run_id, kind, path, step, created_at) VALUES (?, ?, ?, ?, ?)")
      .bind_int(1, run_id)
      .bind_text(2, kind)
      .bind_text(3, path)
      .bind_int(4, step)
      .bind_real(5, now_seconds())
      .run();
  transaction.commit();
}

void ResultsStore::finish_run(int64_t run_id, RunStatus status, const std::string& error) {
  Transaction transaction(db_, path_);
  Statement update(db_, path_, "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE id = ?");
  update.bind_text(1, status_name(status));
  if (status == RunStatus::running) {
    update.bind_null(2);  // set back to running (a resume): it has no end yet
  } else {
    update.bind_real(2, now_seconds());
  }
  update.bind_text_or_null(3, error).bind_int(4, run_id).run();
  if (sqlite3_changes(db_) == 0) fail(path_, "no run with id " + std::to_string(run_id));
  transaction.commit();
}

std::optional<int64_t> ResultsStore::find_finished(const std::string& experiment,
                                                   const std::string& variant, int64_t seed,
                                                   const std::string& config_hash) {
  Statement find(db_, path_,
                 "SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id "
                 "WHERE e.name = ? AND r.variant = ? AND r.seed = ? AND r.config_hash = ? "
                 "AND r.status = 'finished' ORDER BY r.id DESC LIMIT 1");
  find.bind_text(1, experiment).bind_text(2, variant).bind_int(3, seed).bind_text(4, config_hash);
  if (!find.step()) return std::nullopt;
  return find.column_int(0);
}

QueryResult ResultsStore::query(const std::string& sql) {
  auto failed = [&](const std::string& message) { return Error("query failed: " + message); };
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, &tail) !=
      SQLITE_OK) {
    throw failed(sqlite3_errmsg(db_));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owner(stmt, sqlite3_finalize);
  if (!stmt) throw failed("no SQL statement given");

  // Whatever follows the first statement must be whitespace or comments: preparing it must
  // give no statement. Running only part of what the user wrote would be a silent surprise.
  sqlite3_stmt* next = nullptr;
  int rc = sqlite3_prepare_v2(db_, tail, -1, &next, nullptr);
  sqlite3_finalize(next);
  if (rc != SQLITE_OK || next) {
    throw failed("only one SQL statement is allowed; found more after '" +
                 std::string(sql.c_str(), tail) + "'");
  }

  QueryResult result;
  int count = sqlite3_column_count(stmt);
  for (int c = 0; c < count; ++c) result.columns.push_back(sqlite3_column_name(stmt, c));
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < count; ++c) row.push_back(cell_text(stmt, c));
    result.rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) throw failed(sqlite3_errmsg(db_));
  return result;
}

int64_t ResultsStore::merge_from(const std::string& other_path) {
  std::string refusal = "cannot merge '" + other_path + "' into results database '" + path_ + "': ";
  std::error_code ec;
  if (!std::filesystem::exists(other_path, ec)) throw Error(refusal + "no such file");
  if (std::filesystem::equivalent(path_, other_path, ec)) {
    throw Error(refusal + "it is the same database");
  }

  struct Detach {
    sqlite3* db;
    bool attached = false;
    ~Detach() {
      if (attached) sqlite3_exec(db, "DETACH DATABASE merge_source", nullptr, nullptr, nullptr);
    }
  } detach{db_};

  int64_t imported = 0;
  try {
    Statement(db_, path_, "ATTACH DATABASE ? AS merge_source").bind_text(1, other_path).run();
    detach.attached = true;
    Transaction transaction(db_, path_);  // ends (commit or rollback) before the detach
    sqlite3_stmt* version = nullptr;
    sqlite3_prepare_v2(db_, "SELECT value FROM merge_source.meta WHERE key = 'schema_version'",
                       -1, &version, nullptr);
    bool known = version && sqlite3_step(version) == SQLITE_ROW &&
                 sqlite3_column_int(version, 0) == kSchemaVersion;
    sqlite3_finalize(version);
    if (!known) {
      throw Error(refusal + "it is not an htm results database of schema version " +
                  std::to_string(kSchemaVersion));
    }
    // merge_runs maps each imported run's id there to its new id here; runs already here
    // (same uuid) are skipped with everything recorded under them.
    exec(R"sql(
      INSERT OR IGNORE INTO main.experiments(name, created_at)
        SELECT name, created_at FROM merge_source.experiments;
      DROP TABLE IF EXISTS temp.merge_runs;
      CREATE TEMP TABLE merge_runs(old_id INTEGER PRIMARY KEY, uuid TEXT UNIQUE, new_id INTEGER);
      INSERT INTO temp.merge_runs(old_id, uuid)
        SELECT id, uuid FROM merge_source.runs WHERE uuid NOT IN (SELECT uuid FROM main.runs);
      INSERT INTO main.runs(uuid, experiment_id, variant, seed, status, started_at, ended_at,
                            source_file, config_toml, config_hash, git_revision, torch_version,
                            htm_version, host, artifact_dir, error)
        SELECT s.uuid, me.id, s.variant, s.seed, s.status, s.started_at, s.ended_at,
               s.source_file, s.config_toml, s.config_hash, s.git_revision, s.torch_version,
               s.htm_version, s.host, s.artifact_dir, s.error
        FROM temp.merge_runs map
        JOIN merge_source.runs s ON s.id = map.old_id
        JOIN merge_source.experiments se ON se.id = s.experiment_id
        JOIN main.experiments me ON me.name = se.name
        ORDER BY s.id;
      UPDATE temp.merge_runs SET new_id = (SELECT id FROM main.runs r WHERE r.uuid = merge_runs.uuid);
      INSERT INTO main.params(run_id, key, value)
        SELECT map.new_id, x.key, x.value FROM merge_source.params x
        JOIN temp.merge_runs map ON map.old_id = x.run_id;
      INSERT INTO main.run_plugins(run_id, kind, name, version)
        SELECT map.new_id, x.kind, x.name, x.version FROM merge_source.run_plugins x
        JOIN temp.merge_runs map ON map.old_id = x.run_id;
      INSERT INTO main.tags(run_id, key, value)
        SELECT map.new_id, x.key, x.value FROM merge_source.tags x
        JOIN temp.merge_runs map ON map.old_id = x.run_id;
      INSERT INTO main.metrics(run_id, step, epoch, split, name, value, time)
        SELECT map.new_id, x.step, x.epoch, x.split, x.name, x.value, x.time
        FROM merge_source.metrics x JOIN temp.merge_runs map ON map.old_id = x.run_id
        ORDER BY x.rowid;
      INSERT INTO main.artifacts(run_id, kind, path, step, created_at)
        SELECT map.new_id, x.kind, x.path, x.step, x.created_at
        FROM merge_source.artifacts x JOIN temp.merge_runs map ON map.old_id = x.run_id
        ORDER BY x.rowid;
    )sql");
    {
      Statement count(db_, path_, "SELECT count(*) FROM temp.merge_runs");
      count.step();
      imported = count.column_int(0);
    }
    exec("DROP TABLE temp.merge_runs");
    transaction.commit();
  } catch (const Error& error) {
    std::string message = error.what();
    if (message.rfind(refusal, 0) == 0) throw;
    size_t cause = message.find("': ");  // drop "results database 'PATH'", already in refusal
    throw Error(refusal + (cause == std::string::npos ? message : message.substr(cause + 3)));
  }
  return imported;
}

}  // namespace htm
