// A database checked before it is written: SQLite's quick_check (or integrity_check), run on a
// read-only connection so that checking never changes the file (docs/reliability.md).
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "htm/error.h"
#include "store/results_store.h"
#include "store/sqlite.h"

namespace htm {

std::vector<std::string> ResultsStore::check_file(const std::string& path, bool full, int limit) {
  std::error_code ec;
  if (path == ":memory:" || !std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0)
    return {};
  sqlite3* db = nullptr;
  std::vector<std::string> complaints;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    complaints.push_back(db != nullptr ? sqlite3_errmsg(db) : "cannot open it");
    sqlite3_close_v2(db);
    return complaints;
  }
  sqlite3_busy_timeout(db, 30000);
  const std::string pragma =
      std::string(full ? "PRAGMA integrity_check(" : "PRAGMA quick_check(") + std::to_string(limit) + ")";
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, pragma.c_str(), -1, &stmt, nullptr);
  while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    const std::string line = text != nullptr ? text : "";
    if (line != "ok") complaints.push_back(line);
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) complaints.push_back(sqlite3_errmsg(db));
  sqlite3_finalize(stmt);
  sqlite3_close_v2(db);
  return complaints;
}

void ResultsStore::require_sound(const std::string& path) {
  const std::vector<std::string> complaints = check_file(path);
  if (complaints.empty()) return;
  throw Error("results database '" + path + "' is malformed (SQLite's quick_check: " + complaints.front() +
              (complaints.size() > 1 ? ", and " + std::to_string(complaints.size() - 1) + " more" : std::string()) +
              "); htm writes nothing into it. See htm db check " + path +
              ", and docs/reliability.md to recover its runs into a new file");
}

namespace {

// Copies the rows of src.`table` that SQLite can still read into main.`table`, a chunk of
// rowids at a time; a chunk that fails is halved until the unreadable rows are isolated and
// skipped. Returns the rows copied; `lost` gets the rowid stretches skipped.
int64_t salvage_table(sqlite3* db, const std::string& path, const std::string& table, std::string* lost) {
  {  // its columns from the schema alone: a query on the table would read its (maybe damaged) root page
    store::Statement columns(db, path, "SELECT group_concat(quote(name), ', ') FROM pragma_table_info(?, 'src')");
    columns.bind_text(1, table);
    const std::string list = columns.step() ? columns.column_text(0) : "";
    if (list.empty()) throw Error("table " + table + " is not in its schema");
    store::run_sql(db, path, ("CREATE TABLE main." + table + " (" + list + ")").c_str());
  }
  int64_t last = 0;
  {
    sqlite3_stmt* max = nullptr;
    if (sqlite3_prepare_v2(db, ("SELECT max(rowid) FROM src." + table).c_str(), -1, &max, nullptr) == SQLITE_OK &&
        sqlite3_step(max) == SQLITE_ROW)
      last = sqlite3_column_int64(max, 0);
    else
      last = -1;
    sqlite3_finalize(max);
  }
  if (last < 0) {  // the rightmost path is damaged; if no row at all can be read, the root is
    sqlite3_stmt* any = nullptr;
    const bool readable = sqlite3_prepare_v2(db, ("SELECT rowid FROM src." + table + " LIMIT 1").c_str(), -1, &any,
                                             nullptr) == SQLITE_OK &&
                          sqlite3_step(any) == SQLITE_ROW;
    sqlite3_finalize(any);
    if (!readable) {
      *lost = table + ": every row (its root page is unreadable)";
      return 0;
    }
    last = std::numeric_limits<int32_t>::max();  // probe up to here
  }
  const std::string copy = "INSERT INTO main." + table + " SELECT * FROM src." + table + " WHERE rowid BETWEEN ? AND ?";
  int64_t copied = 0, lost_from = 0, lost_to = -1;
  int64_t budget = 1 << 12, gave_up_at = 0;  // failed reads allowed: a table whose root page is gone fails every one
  const auto note_lost = [&] {
    if (lost_to < lost_from) return;
    *lost += (lost->empty() ? table + " rowids " : ", ") + std::to_string(lost_from) +
             (lost_to > lost_from ? "-" + std::to_string(lost_to) : "");
  };
  const auto chunk = [&](auto&& self, int64_t from, int64_t to) -> void {
    sqlite3_stmt* stmt = nullptr;  // one statement, one implicit transaction: all its rows or none
    int rc = sqlite3_prepare_v2(db, copy.c_str(), -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_int64(stmt, 1, from);
      sqlite3_bind_int64(stmt, 2, to);
      rc = sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    if (rc == SQLITE_DONE) {
      copied += sqlite3_changes(db);
      return;
    }
    if (--budget < 0 || to - from > (int64_t{1} << 40)) {  // no rows to isolate here, or no end in sight
      if (budget == -1) gave_up_at = from;
      return;
    }
    if (from == to) {  // unreadable: extend the stretch being skipped, or start another
      if (from != lost_to + 1) {
        note_lost();
        lost_from = from;
      }
      lost_to = from;
      return;
    }
    const int64_t mid = from + (to - from) / 2;
    self(self, from, mid);
    self(self, mid + 1, to);
  };
  constexpr int64_t kChunk = 4096;
  chunk(chunk, std::numeric_limits<int64_t>::min() + 1, 0);  // none in htm's tables, but SQLite allows them
  for (int64_t from = 1; from <= last && budget >= 0; from += kChunk)
    chunk(chunk, from, std::min(last, from + kChunk - 1));
  note_lost();
  if (gave_up_at != 0) *lost += (lost->empty() ? table + " rowids " : ", ") + std::to_string(gave_up_at) + " on";
  return copied;
}

}  // namespace

RecoveryReport ResultsStore::recover_file(const std::string& damaged, const std::string& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(damaged, ec)) throw Error("results database '" + damaged + "': no such file");
  if (std::filesystem::exists(out, ec))
    throw Error("htm db recover: '" + out + "' exists; name a new file (nothing is written over)");
  RecoveryReport report;
  const std::string salvage = out + ".salvage";
  std::filesystem::remove(salvage, ec);
  {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(salvage.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr) !=
        SQLITE_OK) {
      const std::string message = db != nullptr ? sqlite3_errmsg(db) : "cannot create it";
      sqlite3_close_v2(db);
      throw Error("htm db recover: '" + salvage + "': " + message);
    }
    try {
      store::Statement(db, salvage, "ATTACH DATABASE ? AS src").bind_text(1, "file:" + damaged + "?mode=ro").run();
    } catch (...) {
      sqlite3_close_v2(db);
      throw;
    }
    try {
      // A scratch file: its journal in memory, no syncs. No transaction spans the tables either: SQLite
      // refuses to commit one that read a damaged page, so each copy commits on its own.
      store::run_sql(db, salvage, "PRAGMA main.journal_mode=MEMORY; PRAGMA main.synchronous=OFF");
      // The annotation tables (notes, user tags, archived flags, saved views) too, where the file has them.
      const std::vector<std::string> annotations = {"run_notes", "run_user_tags", "run_archived", "saved_views"};
      for (const std::string& table : {"meta", "experiments", "runs", "run_plugins", "params", "tags", "metrics",
                                       "artifacts", "run_notes", "run_user_tags", "run_archived", "saved_views"}) {
        store::Statement has(db, salvage, "SELECT 1 FROM src.sqlite_master WHERE type = 'table' AND name = ?");
        if (std::count(annotations.begin(), annotations.end(), table) && !has.bind_text(1, table).step()) continue;
        std::string lost;
        const int64_t rows = salvage_table(db, salvage, table, &lost);
        report.rows.emplace_back(table, rows);
        if (!lost.empty()) report.lost.push_back(lost);
      }
      // A run that was training when the file broke is unfinished: killed, so htm run resumes it.
      store::run_sql(db, salvage, "UPDATE runs SET status = 'killed' WHERE status = 'running'");
    } catch (const std::exception& e) {
      sqlite3_close_v2(db);
      std::filesystem::remove(salvage, ec);
      throw Error("htm db recover: SQLite cannot read the tables of '" + damaged + "' (" + e.what() +
                  "); nothing could be recovered");
    }
    sqlite3_close_v2(db);
  }
  try {
    ResultsStore recovered(out);
    report.runs = recovered.merge_from(salvage);
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d", std::localtime(&now));
    store::Statement(recovered.db_, out,
                     "INSERT OR REPLACE INTO tags(run_id, key, value) SELECT id, 'recovered', ? FROM runs")
        .bind_text(
            1, std::string("from ") + damaged + " on " + stamp + (report.lost.empty() ? "" : "; rows were lost there"))
        .run();
  } catch (...) {
    std::filesystem::remove(salvage, ec);
    throw;
  }
  std::filesystem::remove(salvage, ec);
  return report;
}

}  // namespace htm
