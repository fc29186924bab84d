// ResultsStore's reads of arbitrary SQL: query() (every cell as text, for tables a person reads)
// and scan() (typed cells, for millions of metric rows), both read-only unless asked.
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "htm/error.h"
#include "store/results_store.h"
#include "store/sqlite.h"

namespace htm {
namespace {

// While it lives, statements prepared on `db` may not ATTACH or DETACH a database nor set a
// PRAGMA (sqlite3_stmt_readonly() answers for everything else, and calls every PRAGMA writing).
struct ReadOnlyGuard {
  sqlite3* db;
  bool active;
  bool denied = false;
  bool reporting_pragma = false;
  ReadOnlyGuard(sqlite3* db, bool active) : db(db), active(active) {
    if (active) sqlite3_set_authorizer(db, authorize, this);
  }
  ~ReadOnlyGuard() {
    if (active) sqlite3_set_authorizer(db, nullptr, nullptr);
  }
  static int authorize(void* self, int action, const char* a, const char* b, const char*, const char*) {
    static const std::set<std::string> reporting = {
        "table_info",    "table_xinfo",      "table_list",        "index_list",      "index_info",
        "index_xinfo",   "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
        "database_list", "collation_list",   "function_list",     "pragma_list",     "compile_options"};
    auto* guard = static_cast<ReadOnlyGuard*>(self);
    if (action == SQLITE_PRAGMA && (b == nullptr || reporting.count(a ? a : "") > 0)) {
      guard->reporting_pragma = true;
      return SQLITE_OK;
    }
    if (action == SQLITE_PRAGMA || action == SQLITE_ATTACH || action == SQLITE_DETACH) {
      guard->denied = true;
      return SQLITE_DENY;
    }
    return SQLITE_OK;
  }
};

}  // namespace

std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> ResultsStore::prepare(const std::string& sql,
                                                                            const std::vector<SqlValue>& params,
                                                                            bool allow_write) {
  auto failed = [&](const std::string& message) { return Error("query failed: " + message); };
  const std::string refused = "'" + sql.substr(0, 60) + (sql.size() > 60 ? "...'" : "'") +
                              " would change a database; queries only read unless writing is asked for "
                              "(htm query --write)";
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  ReadOnlyGuard guard(db_, !allow_write);
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, &tail) != SQLITE_OK) {
    throw failed(guard.denied ? refused : std::string(sqlite3_errmsg(db_)));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owner(stmt, sqlite3_finalize);
  if (!stmt) throw failed("no SQL statement given");
  if (!allow_write && !sqlite3_stmt_readonly(stmt) && !guard.reporting_pragma) throw failed(refused);

  // Whatever follows the first statement must be whitespace or comments: preparing it must
  // give no statement. Running only part of what the user wrote would be a silent surprise.
  sqlite3_stmt* next = nullptr;
  int rc = sqlite3_prepare_v2(db_, tail, -1, &next, nullptr);
  sqlite3_finalize(next);
  if (rc != SQLITE_OK || next) {
    throw failed("only one SQL statement is allowed; found more after '" + std::string(sql.c_str(), tail) + "'");
  }

  if (sqlite3_bind_parameter_count(stmt) != static_cast<int>(params.size()))
    throw failed("the statement has " + std::to_string(sqlite3_bind_parameter_count(stmt)) + " parameters but " +
                 std::to_string(params.size()) + " values were given");
  for (size_t i = 0; i < params.size(); ++i)
    if (store::bind_value(stmt, static_cast<int>(i) + 1, params[i]) != SQLITE_OK) throw failed(sqlite3_errmsg(db_));
  return owner;
}

QueryResult ResultsStore::query(const std::string& sql, const std::vector<SqlValue>& params, bool allow_write) {
  auto owner = prepare(sql, params, allow_write);
  sqlite3_stmt* stmt = owner.get();
  int rc = SQLITE_OK;
  QueryResult result;
  int count = sqlite3_column_count(stmt);
  for (int c = 0; c < count; ++c) result.columns.push_back(sqlite3_column_name(stmt, c));
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < count; ++c) row.push_back(store::cell_text(stmt, c));
    result.rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) throw Error("query failed: " + std::string(sqlite3_errmsg(db_)));
  return result;
}

void ResultsStore::scan(const std::string& sql, const std::vector<SqlValue>& params,
                        const std::function<void(const Row&)>& each) {
  auto owner = prepare(sql, params, false);
  const Row row(owner.get());
  int rc;
  while ((rc = sqlite3_step(owner.get())) == SQLITE_ROW) each(row);
  if (rc != SQLITE_DONE) throw Error("query failed: " + std::string(sqlite3_errmsg(db_)));
}

std::vector<std::string> ResultsStore::metric_names(const std::vector<int64_t>& runs) {
  // metrics_by_series is (run_id, split, name, step): each step seeks past the series it found.
  auto owner = prepare(
      "SELECT split, name FROM metrics WHERE run_id = ?1 AND (split, name) > (?2, ?3) ORDER BY split, name LIMIT 1",
      {int64_t{0}, std::string(), std::string()}, false);
  sqlite3_stmt* stmt = owner.get();
  std::set<std::string> names;
  for (const int64_t run : runs) {
    std::string split, name;
    for (;;) {
      sqlite3_reset(stmt);
      int rc = SQLITE_OK;
      for (const auto& [at, value] : {std::pair<int, SqlValue>{1, run}, {2, split}, {3, name}})
        if (rc == SQLITE_OK) rc = store::bind_value(stmt, at, value);
      if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) throw Error("query failed: " + std::string(sqlite3_errmsg(db_)));
      split = store::cell_text(stmt, 0);
      name = store::cell_text(stmt, 1);
      names.insert(split + "/" + name);
    }
  }
  return {names.begin(), names.end()};
}

int64_t Row::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
double Row::real(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt_, column);
}
std::string Row::text(int column) const { return std::string(view(column)); }
std::string_view Row::view(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  return text == nullptr ? std::string_view()
                         : std::string_view(reinterpret_cast<const char*>(text),
                                            static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

}  // namespace htm
