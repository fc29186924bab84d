#include "store/sqlite.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "htm/error.h"

namespace htm::store {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void fail(const std::string& path, const std::string& message) {
  throw Error("results database '" + path + "': " + message);
}

void fail_sqlite(sqlite3* db, const std::string& path, const std::string& message) {
  const int code = sqlite3_errcode(db) & 0xff;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
    throw DatabaseCorrupt("results database '" + path + "' is malformed (" + message +
                          "): nothing more is written to it; htm db check " + path + " says what is wrong, and " +
                          "docs/reliability.md how to recover its runs into a new file");
  fail(path, message);
}

void run_sql(sqlite3* db, const std::string& path, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    fail_sqlite(db, path, text);
  }
}

// Switching a file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once,
// without the busy handler, while another process is opening the same fresh file: retry.
void enable_wal(sqlite3* db, const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline) fail(path, sqlite3_errmsg(db));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int bind_value(sqlite3_stmt* stmt, int index, const SqlValue& value) {
  if (const auto* integer = std::get_if<int64_t>(&value)) return sqlite3_bind_int64(stmt, index, *integer);
  if (const auto* real = std::get_if<double>(&value)) return sqlite3_bind_double(stmt, index, *real);
  const std::string& text = std::get<std::string>(value);
  return sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string cell_text(sqlite3_stmt* stmt, int index) {
  char buffer[64];
  switch (sqlite3_column_type(stmt, index)) {
    case SQLITE_NULL:
      return "";
    case SQLITE_INTEGER:
      std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(sqlite3_column_int64(stmt, index)));
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

Statement::Statement(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
  if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail_sqlite(db, path, sqlite3_errmsg(db));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind_int(int index, int64_t value) {
  check(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bind_real(int index, double value) {
  check(sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Statement& Statement::bind_text(int index, const std::string& value) {
  check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT));
  return *this;
}

Statement& Statement::bind_null(int index) {
  check(sqlite3_bind_null(stmt_, index));
  return *this;
}

Statement& Statement::bind_text_or_null(int index, const std::string& value) {
  return value.empty() ? bind_null(index) : bind_text(index, value);
}

Statement& Statement::bind(int index, const SqlValue& value) {
  check(bind_value(stmt_, index, value));
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail_sqlite(db_, path_, sqlite3_errmsg(db_));
}

void Statement::run() {
  step();
  sqlite3_reset(stmt_);
}

int64_t Statement::column_int(int index) { return sqlite3_column_int64(stmt_, index); }

double Statement::column_real(int index) { return sqlite3_column_double(stmt_, index); }

std::string Statement::column_text(int index) {
  auto text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  return text ? text : "";
}

void Statement::check(int rc) {
  if (rc != SQLITE_OK) fail_sqlite(db_, path_, sqlite3_errmsg(db_));
}

Transaction::Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {
  run_sql(db_, path_, "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  run_sql(db_, path_, "COMMIT");
  committed_ = true;
}

}  // namespace htm::store
