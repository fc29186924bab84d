// A thin RAII layer over SQLite for the results store: statements with bound parameters,
// write transactions, errors that name the database. Internal to store/.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "store/results_store.h"

namespace htm::store {

inline constexpr int kSchemaVersion = 2;  ///< what this htm writes and reads (docs/results.md)
inline constexpr int kBusyTimeoutMs = 30000;

/// Seconds since the Unix epoch, as the store records times.
double now_seconds();
/// Throws htm::Error "results database 'PATH': message".
[[noreturn]] void fail(const std::string& path, const std::string& message);
/// Throws DatabaseCorrupt when `db`'s last error is SQLITE_CORRUPT or SQLITE_NOTADB, else as fail().
[[noreturn]] void fail_sqlite(sqlite3* db, const std::string& path, const std::string& message);
/// Runs SQL that returns no rows (several statements allowed).
void run_sql(sqlite3* db, const std::string& path, const char* sql);
/// Switches the file to WAL, retrying while another process holds the lock.
void enable_wal(sqlite3* db, const std::string& path);

/// Binds `value` at 1-based `index` of `stmt` by its type; returns SQLite's result code.
int bind_value(sqlite3_stmt* stmt, int index, const SqlValue& value);
/// A cell as query() shows it: integers in full, reals as %.6g, NULL as "".
std::string cell_text(sqlite3_stmt* stmt, int index);

/// A prepared statement that finalizes itself; errors name the database.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind_int(int index, int64_t value);
  Statement& bind_real(int index, double value);
  Statement& bind_text(int index, const std::string& value);
  Statement& bind_null(int index);
  /// Empty text is stored as NULL: "not recorded" reads better in SQL as `IS NULL`.
  Statement& bind_text_or_null(int index, const std::string& value);
  /// Binds `value` at 1-based `index` by its type.
  Statement& bind(int index, const SqlValue& value);

  /// Advances; true while a row is available.
  bool step();
  /// Runs a statement that returns no rows, then readies it for new bindings.
  void run();
  int64_t column_int(int index);
  double column_real(int index);
  std::string column_text(int index);

 private:
  void check(int rc);
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// BEGIN IMMEDIATE takes the write lock up front, so concurrent writers wait on the busy
/// timeout instead of failing when a read transaction cannot be upgraded.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  sqlite3* db_;
  const std::string& path_;
  bool committed_ = false;
};

}  // namespace htm::store
