// ResultsStore's annotation tables (annotations.h): their schema, the writes (each one short
// BEGIN IMMEDIATE transaction), the reads (a file without the tables has no annotations), and
// what merge_from carries of them.
#include "store/annotations.h"

#include <cctype>
#include <string>
#include <vector>

#include "htm/error.h"
#include "store/results_store.h"
#include "store/sqlite.h"

namespace htm {

using store::now_seconds;
using store::Statement;
using store::Transaction;

// docs/results.md describes each table: keep the two in step. The tables key on the run's id
// here; a merge maps them through the runs' uuids.
const char* const kAnnotationSchema = R"sql(
CREATE TABLE IF NOT EXISTS run_notes (
  run_id     INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  text       TEXT NOT NULL,
  updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_user_tags (
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  updated_at REAL NOT NULL,
  PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS run_archived (
  run_id     INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  archived   INTEGER NOT NULL CHECK (archived IN (0, 1)),
  updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS saved_views (
  name       TEXT PRIMARY KEY,
  state      TEXT NOT NULL,
  updated_at REAL NOT NULL
);
)sql";

namespace {

// Whether `text` is UTF-8 without control characters (a newline and a tab allowed where `lines`).
bool clean_text(const std::string& text, bool lines) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(lines && (c == '\n' || c == '\t' || c == '\r'))) || c == 0x7f) return false;
      ++i;
      continue;
    }
    const size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || i + n > text.size() || c == 0xc0 || c == 0xc1) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

std::string sized(const char* what, const std::string& text, size_t most, bool lines) {
  if (text.size() > most)
    return what + std::string(" is ") + std::to_string(text.size()) + " bytes; at most " + std::to_string(most);
  if (!clean_text(text, lines))
    return what + std::string(lines ? " is not UTF-8 text (or has a control character)"
                                    : " is not one line of UTF-8 text (a control character or a line break)");
  return "";
}

bool run_exists(sqlite3* db, const std::string& path, int64_t run_id) {
  Statement find(db, path, "SELECT 1 FROM runs WHERE id = ?");
  return find.bind_int(1, run_id).step();
}

}  // namespace

std::string note_problem(const std::string& text) { return sized("the note", text, kNoteMaxBytes, true); }
std::string tag_key_problem(const std::string& key) {
  if (key.empty()) return "a tag needs a key";
  if (key.size() > kTagKeyMaxBytes)
    return "the tag key is " + std::to_string(key.size()) + " bytes; at most " + std::to_string(kTagKeyMaxBytes);
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return "tag key '" + key + "': only letters, digits, '.', '_' and '-'";
  return "";
}
std::string tag_value_problem(const std::string& value) {
  return sized("the tag value", value, kTagValueMaxBytes, false);
}
std::string view_name_problem(const std::string& name) {
  if (name.find_first_not_of(' ') == std::string::npos) return "a view needs a name";
  return sized("the view name", name, kViewNameMaxBytes, false);
}
std::string view_state_problem(const std::string& state) {
  const std::string problem = sized("the view's state", state, kViewStateMaxBytes, false);
  if (!problem.empty()) return problem;
  if (!state.empty() && state[0] == '?') return "the view's state is a query string without its '?'";
  if (("&" + state).find("&token=") != std::string::npos) return "a view may not keep the server's token";
  return "";
}

// ---- writes: one short transaction each; the run is looked up inside it.

namespace {
void refuse_if(const std::string& path, const std::string& problem) {
  if (!problem.empty()) store::fail(path, problem);
}
}  // namespace

bool ResultsStore::set_note(int64_t run_id, const std::string& text) {
  refuse_if(path_, note_problem(text));
  Transaction transaction(db_, path_);
  if (!run_exists(db_, path_, run_id)) return false;
  Statement(db_, path_, "INSERT OR REPLACE INTO run_notes(run_id, text, updated_at) VALUES (?, ?, ?)")
      .bind_int(1, run_id)
      .bind_text(2, text)
      .bind_real(3, now_seconds())
      .run();
  transaction.commit();
  return true;
}

bool ResultsStore::set_user_tag(int64_t run_id, const std::string& key, const std::string& value) {
  refuse_if(path_, tag_key_problem(key));
  refuse_if(path_, tag_value_problem(value));
  Transaction transaction(db_, path_);
  if (!run_exists(db_, path_, run_id)) return false;
  Statement(db_, path_, "INSERT OR REPLACE INTO run_user_tags(run_id, key, value, updated_at) VALUES (?, ?, ?, ?)")
      .bind_int(1, run_id)
      .bind_text(2, key)
      .bind_text(3, value)
      .bind_real(4, now_seconds())
      .run();
  transaction.commit();
  return true;
}

bool ResultsStore::remove_user_tag(int64_t run_id, const std::string& key) {
  refuse_if(path_, tag_key_problem(key));
  Transaction transaction(db_, path_);
  if (!run_exists(db_, path_, run_id)) return false;
  Statement(db_, path_, "DELETE FROM run_user_tags WHERE run_id = ? AND key = ?")
      .bind_int(1, run_id)
      .bind_text(2, key)
      .run();
  transaction.commit();
  return true;
}

bool ResultsStore::set_archived(int64_t run_id, bool archived) {
  Transaction transaction(db_, path_);
  if (!run_exists(db_, path_, run_id)) return false;
  Statement(db_, path_, "INSERT OR REPLACE INTO run_archived(run_id, archived, updated_at) VALUES (?, ?, ?)")
      .bind_int(1, run_id)
      .bind_int(2, archived ? 1 : 0)
      .bind_real(3, now_seconds())
      .run();
  transaction.commit();
  return true;
}

void ResultsStore::save_view(const std::string& name, const std::string& state) {
  refuse_if(path_, view_name_problem(name));
  refuse_if(path_, view_state_problem(state));
  Transaction transaction(db_, path_);
  Statement(db_, path_, "INSERT OR REPLACE INTO saved_views(name, state, updated_at) VALUES (?, ?, ?)")
      .bind_text(1, name)
      .bind_text(2, state)
      .bind_real(3, now_seconds())
      .run();
  transaction.commit();
}

bool ResultsStore::delete_view(const std::string& name) {
  Transaction transaction(db_, path_);
  Statement(db_, path_, "DELETE FROM saved_views WHERE name = ?").bind_text(1, name).run();
  const bool deleted = sqlite3_changes(db_) > 0;
  transaction.commit();
  return deleted;
}

// ---- reads

bool ResultsStore::has_annotations() {
  Statement find(db_, path_,
                 "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                 "AND name IN ('run_notes', 'run_user_tags', 'run_archived', 'saved_views')");
  find.step();
  return find.column_int(0) == 4;
}

std::map<int64_t, RunAnnotations> ResultsStore::annotations(const std::vector<int64_t>& runs) {
  std::map<int64_t, RunAnnotations> out;
  if (runs.empty() || !has_annotations()) return out;
  Statement note(db_, path_, "SELECT text, updated_at FROM run_notes WHERE run_id = ?");
  Statement tags(db_, path_, "SELECT key, value FROM run_user_tags WHERE run_id = ? ORDER BY key");
  Statement archived(db_, path_, "SELECT archived FROM run_archived WHERE run_id = ?");
  for (const int64_t id : runs) {
    RunAnnotations a;
    bool any = false;
    if (note.bind_int(1, id).step()) {
      a.note = note.column_text(0);
      a.note_at = note.column_real(1);
      any = true;
    }
    note.run();  // reset for the next run
    tags.bind_int(1, id);
    while (tags.step()) {
      a.tags[tags.column_text(0)] = tags.column_text(1);
      any = true;
    }
    tags.run();
    if (archived.bind_int(1, id).step()) {
      a.archived = archived.column_int(0) == 1;
      any = true;
    }
    archived.run();
    if (any) out[id] = a;
  }
  return out;
}

std::vector<SavedView> ResultsStore::saved_views() {
  std::vector<SavedView> views;
  if (!has_annotations()) return views;
  Statement all(db_, path_, "SELECT name, state, updated_at FROM saved_views ORDER BY name");
  while (all.step()) views.push_back({all.column_text(0), all.column_text(1), all.column_real(2)});
  return views;
}

// ---- merge: every source run that is here (imported now or before, matched by uuid) brings its
// annotations; where both files have one (a note, a tag key, the archived flag, a view name),
// the later written wins. A tag removed in one file comes back from the other: removals are not
// carried.
void ResultsStore::merge_annotations() {
  auto source_has = [&](const char* table) {
    Statement find(db_, path_, "SELECT 1 FROM merge_source.sqlite_master WHERE type = 'table' AND name = ?");
    return find.bind_text(1, table).step();
  };
  exec(kAnnotationSchema);  // a file opened read-write has them; this keeps merge_from self-contained
  exec(
      "DROP TABLE IF EXISTS temp.merge_uuids;"
      "CREATE TEMP TABLE merge_uuids(old_id INTEGER PRIMARY KEY, new_id INTEGER NOT NULL);"
      "INSERT INTO temp.merge_uuids SELECT s.id, m.id FROM merge_source.runs s JOIN main.runs m ON m.uuid = s.uuid;");
  if (source_has("run_notes"))
    exec(
        "INSERT INTO main.run_notes(run_id, text, updated_at) SELECT map.new_id, x.text, x.updated_at "
        "FROM merge_source.run_notes x JOIN temp.merge_uuids map ON map.old_id = x.run_id WHERE true "
        "ON CONFLICT(run_id) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at "
        "WHERE excluded.updated_at > run_notes.updated_at;");
  if (source_has("run_user_tags"))
    exec(
        "INSERT INTO main.run_user_tags(run_id, key, value, updated_at) SELECT map.new_id, x.key, x.value, "
        "x.updated_at FROM merge_source.run_user_tags x JOIN temp.merge_uuids map ON map.old_id = x.run_id WHERE true "
        "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at "
        "WHERE excluded.updated_at > run_user_tags.updated_at;");
  if (source_has("run_archived"))
    exec(
        "INSERT INTO main.run_archived(run_id, archived, updated_at) SELECT map.new_id, x.archived, x.updated_at "
        "FROM merge_source.run_archived x JOIN temp.merge_uuids map ON map.old_id = x.run_id WHERE true "
        "ON CONFLICT(run_id) DO UPDATE SET archived = excluded.archived, updated_at = excluded.updated_at "
        "WHERE excluded.updated_at > run_archived.updated_at;");
  if (source_has("saved_views"))
    exec(
        "INSERT INTO main.saved_views(name, state, updated_at) SELECT name, state, updated_at "
        "FROM merge_source.saved_views WHERE true "
        "ON CONFLICT(name) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at "
        "WHERE excluded.updated_at > saved_views.updated_at;");
  exec("DROP TABLE temp.merge_uuids");
}

}  // namespace htm
