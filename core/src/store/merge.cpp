// Importing another results database: every run this one lacks (by uuid), with everything
// recorded under it, and the annotations of every run both have (annotations.cpp), in one
// transaction. Runs still running there are left for a later merge (a shard being written);
// merging the same file again adds nothing.
#include <filesystem>

#include "htm/error.h"
#include "store/results_store.h"
#include "store/sqlite.h"

namespace htm {

using store::kSchemaVersion;
using store::Statement;
using store::Transaction;

namespace {

// merge_runs maps each imported run's id there to its new id here; runs already here (same
// uuid) are skipped with everything recorded under them, and runs still running there are left.
constexpr const char* kCopyRuns = R"sql(
      INSERT OR IGNORE INTO main.experiments(name, created_at)
        SELECT name, created_at FROM merge_source.experiments;
      DROP TABLE IF EXISTS temp.merge_runs;
      CREATE TEMP TABLE merge_runs(old_id INTEGER PRIMARY KEY, uuid TEXT UNIQUE, new_id INTEGER);
      INSERT INTO temp.merge_runs(old_id, uuid)
        SELECT id, uuid FROM merge_source.runs
        WHERE uuid NOT IN (SELECT uuid FROM main.runs) AND status != 'running';
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
    )sql";

// Schema 2 and later: the plugin libraries' paths and hashes of the imported runs.
constexpr const char* kCopyPluginFiles = R"sql(
        UPDATE main.run_plugins SET
          path = (SELECT x.path FROM merge_source.run_plugins x JOIN temp.merge_runs map ON map.old_id = x.run_id
                  WHERE map.new_id = run_plugins.run_id AND x.kind = run_plugins.kind AND x.name = run_plugins.name),
          sha256 = (SELECT x.sha256 FROM merge_source.run_plugins x JOIN temp.merge_runs map ON map.old_id = x.run_id
                    WHERE map.new_id = run_plugins.run_id AND x.kind = run_plugins.kind AND x.name = run_plugins.name)
        WHERE run_id IN (SELECT new_id FROM temp.merge_runs);
      )sql";

}  // namespace

int64_t ResultsStore::merge_from(const std::string& other_path, int64_t* still_running) {
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
    sqlite3_prepare_v2(db_, "SELECT value FROM merge_source.meta WHERE key = 'schema_version'", -1, &version, nullptr);
    const int source_version = version && sqlite3_step(version) == SQLITE_ROW ? sqlite3_column_int(version, 0) : 0;
    sqlite3_finalize(version);
    if (source_version != 1 && source_version != kSchemaVersion) {  // version 1's columns are a subset
      throw Error(refusal + "it is not an htm results database of schema version 1 or " +
                  std::to_string(kSchemaVersion));
    }
    exec(kCopyRuns);
    if (source_version >= 2) exec(kCopyPluginFiles);
    merge_annotations();  // notes, user tags, archived flags, saved views (annotations.cpp)
    {
      Statement count(db_, path_, "SELECT count(*) FROM temp.merge_runs");
      count.step();
      imported = count.column_int(0);
      Statement running(db_, path_,
                        "SELECT count(*) FROM merge_source.runs WHERE status = 'running' "
                        "AND uuid NOT IN (SELECT uuid FROM main.runs)");
      running.step();
      if (still_running != nullptr) *still_running = running.column_int(0);
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
