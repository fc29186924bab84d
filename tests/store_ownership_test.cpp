// The results store against other processes and other programs: run ownership (claims,
// heartbeats, stale owners), read-only opening, queries that may not write, databases that are
// not htm's, and the upgrade from schema version 1.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/artifact_trust.h"
#include "store/results_store.h"
#include "store_test_util.h"

namespace htm {
namespace {

// A database of another program, opened with raw SQLite: htm must leave it exactly as it was.
void make_foreign(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

std::string raw_single(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  std::string out = sqlite3_step(stmt) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)) : "";
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

TEST_F(ResultsStoreTest, AnotherProgramsDatabaseIsRefusedAndLeftUnchanged) {
  const std::string path = db_path("foreign.sqlite");
  make_foreign(path, "CREATE TABLE notes(id INTEGER, text TEXT); INSERT INTO notes VALUES (1, 'mine');");
  for (OpenMode mode : {OpenMode::read_write, OpenMode::read_only}) {
    const std::string message = error_of([&] { ResultsStore store(path, mode); });
    EXPECT_NE(message.find("not an htm results database"), std::string::npos) << message;
    EXPECT_NE(message.find("notes"), std::string::npos) << message;
  }
  EXPECT_EQ(raw_single(path, "SELECT count(*) FROM sqlite_master"), "1");  // no htm tables added
  EXPECT_EQ(raw_single(path, "PRAGMA journal_mode"), "delete");            // not switched to WAL
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST_F(ResultsStoreTest, ADatabaseWhoseMetaWasDroppedIsNotRestamped) {
  {
    ResultsStore store(db_path());
    store.begin_run(make_run());
    store.query("DROP TABLE meta", {}, true);
  }
  const std::string message = error_of([&] { ResultsStore store(db_path()); });
  EXPECT_NE(message.find("not an htm results database"), std::string::npos) << message;
  EXPECT_EQ(raw_single(db_path(), "SELECT count(*) FROM sqlite_master WHERE name = 'meta'"), "0");
}

TEST_F(ResultsStoreTest, QueriesOnlyReadUnlessWritingIsAskedFor) {
  ResultsStore store(db_path());
  const int64_t run = store.begin_run(make_run());
  const std::string attach = "ATTACH DATABASE '" + db_path("other.sqlite") + "' AS other";
  const std::string vacuum = "VACUUM INTO '" + db_path("copy.sqlite") + "'";
  for (const std::string& sql :
       {std::string("DELETE FROM runs"), std::string("DROP TABLE metrics"), std::string("UPDATE meta SET value = '1'"),
        attach, vacuum, std::string("PRAGMA journal_mode = DELETE"), std::string("PRAGMA query_only = 0"),
        std::string("INSERT INTO tags(run_id, key) VALUES (1, 'x')")}) {
    const std::string message = error_of([&] { store.query(sql); });
    EXPECT_NE(message.find("would change a database"), std::string::npos) << sql << ": " << message;
  }
  EXPECT_FALSE(fs::exists(db_path("other.sqlite")));
  EXPECT_FALSE(fs::exists(db_path("copy.sqlite")));
  EXPECT_EQ(single(store, "SELECT count(*) FROM runs"), "1");
  EXPECT_EQ(single(store, "PRAGMA journal_mode"), "wal");  // reading PRAGMAs still work
  EXPECT_EQ(store.query("PRAGMA table_info(runs)").rows.size() > 10, true);
  store.query("DELETE FROM tags WHERE run_id = ?", {run}, true);  // with writing allowed
}

TEST_F(ResultsStoreTest, ReadOnlyOpeningNeverWritesAndNeedsAnExistingDatabase) {
  EXPECT_NE(
      error_of([&] { ResultsStore store(db_path("absent.sqlite"), OpenMode::read_only); }).find("no such database"),
      std::string::npos);
  EXPECT_FALSE(fs::exists(db_path("absent.sqlite")));
  {
    ResultsStore store(db_path());
    store.begin_run(make_run());
  }
  ResultsStore reader(db_path(), OpenMode::read_only);
  EXPECT_EQ(single(reader, "SELECT count(*) FROM runs"), "1");
  EXPECT_NE(error_of([&] { reader.query("DELETE FROM runs", {}, true); }).find("readonly"), std::string::npos);
  EXPECT_NE(error_of([&] { reader.begin_run(make_run()); }).find("readonly"), std::string::npos);
}

TEST_F(ResultsStoreTest, AVersion1DatabaseIsUpgradedKeepingItsRuns) {
  // The version 1 schema's runs table: no 'killed', no owner columns.
  make_foreign(db_path(), R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '1');
    CREATE TABLE experiments(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, created_at REAL);
    CREATE TABLE runs(id INTEGER PRIMARY KEY, uuid TEXT UNIQUE NOT NULL,
      experiment_id INTEGER NOT NULL REFERENCES experiments(id), variant TEXT, seed INTEGER,
      status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
      started_at REAL, ended_at REAL, source_file TEXT, config_toml TEXT, config_hash TEXT,
      git_revision TEXT, torch_version TEXT, htm_version TEXT, host TEXT, artifact_dir TEXT, error TEXT);
    CREATE TABLE run_plugins(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
      kind TEXT NOT NULL, name TEXT NOT NULL, version TEXT, PRIMARY KEY (run_id, kind, name));
    CREATE TABLE params(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL,
      value TEXT, PRIMARY KEY (run_id, key));
    CREATE TABLE metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
      epoch INTEGER, split TEXT NOT NULL, name TEXT NOT NULL, value REAL, time REAL NOT NULL);
    INSERT INTO experiments VALUES (1, 'old', 0);
    INSERT INTO runs(id, uuid, experiment_id, variant, seed, status, config_hash)
      VALUES (7, 'u7', 1, 'v', 0, 'running', 'h');
    INSERT INTO metrics VALUES (7, 1, 0, 'test', 'mse', 0.5, 0);
  )sql");
  ResultsStore store(db_path());
  EXPECT_EQ(single(store, "SELECT value FROM meta WHERE key = 'schema_version'"), "2");
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics WHERE run_id = 7"), "1");
  EXPECT_EQ(store.settle_stale(), std::vector<int64_t>{7});  // no owner recorded: nobody runs it
  EXPECT_EQ(single(store, "SELECT status FROM runs WHERE id = 7"), "killed");
  EXPECT_TRUE(store.query("PRAGMA foreign_key_check").rows.empty());
}

// The pid of a process that has ended (reaped), for an owner that is gone.
int64_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(ResultsStoreTest, ClaimsGiveEachRunOneOwnerAndResumeWhatWasLeft) {
  ResultsStore store(db_path());
  RunInfo run = make_run();
  run.artifact_dir = (dir_ / "runs/quickstart/learned").string();  // under a root htm run marked: resumable
  mark_artifacts_root((dir_ / "runs").string());
  const Claim first = store.claim_run(run, false);
  ASSERT_EQ(first.outcome, Claim::Outcome::started);
  // This process is alive: the same identity is its work, not another's.
  const Claim second = store.claim_run(run, false);
  EXPECT_EQ(second.outcome, Claim::Outcome::taken);
  EXPECT_EQ(second.run_id, first.run_id);
  EXPECT_NE(second.detail.find("pid " + std::to_string(getpid())), std::string::npos) << second.detail;
  EXPECT_TRUE(store.stale_runs().empty());
  store.heartbeat(first.run_id);

  // Its owner dies: the row is settled as killed and the next claim resumes it.
  store.query("UPDATE runs SET owner_pid = ? WHERE id = ?", {dead_pid(), first.run_id}, true);
  EXPECT_EQ(store.stale_runs(), std::vector<int64_t>{first.run_id});
  EXPECT_NE(error_of([&] { store.heartbeat(first.run_id); }).find("no longer this process's"), std::string::npos);
  EXPECT_EQ(store.settle_stale(), std::vector<int64_t>{first.run_id});
  EXPECT_EQ(single(store, "SELECT status FROM runs"), "killed");
  const Claim resumed = store.claim_run(run, false);
  EXPECT_EQ(resumed.outcome, Claim::Outcome::resumed);
  EXPECT_EQ(resumed.run_id, first.run_id);
  EXPECT_EQ(resumed.detail, "killed");
  EXPECT_EQ(single(store, "SELECT status || ' ' || resumes || ' ' || owner_pid FROM runs"),
            "running 1 " + std::to_string(getpid()));

  // Finished: left alone, unless forced (a new row). Another host's fresh heartbeat counts as alive.
  store.finish_run(first.run_id, RunStatus::finished);
  EXPECT_EQ(store.claim_run(run, false).outcome, Claim::Outcome::finished);
  const Claim forced = store.claim_run(run, true);
  EXPECT_EQ(forced.outcome, Claim::Outcome::started);
  EXPECT_NE(forced.run_id, first.run_id);
  store.query("UPDATE runs SET owner_host = 'elsewhere', heartbeat_at = unixepoch('now') WHERE id = ?", {forced.run_id},
              true);
  EXPECT_TRUE(store.stale_runs().empty());
  store.query("UPDATE runs SET heartbeat_at = unixepoch('now') - 3600 WHERE id = ?", {forced.run_id}, true);
  EXPECT_EQ(store.stale_runs(), std::vector<int64_t>{forced.run_id});
}

TEST_F(ResultsStoreTest, TruncateAfterDropsWhatAResumedRunLogsAgain) {
  ResultsStore store(db_path());
  const int64_t run = store.begin_run(make_run());
  for (int64_t step = 0; step <= 4; ++step) store.log_metrics(run, step, 0, "train", {{"loss", 1.0 / (step + 1)}});
  store.add_artifact(run, "checkpoint", "a", 2);
  store.add_artifact(run, "checkpoint", "b", 4);
  store.truncate_after(run, 2);
  EXPECT_EQ(single(store, "SELECT group_concat(step) FROM metrics"), "0,1,2");
  EXPECT_EQ(single(store, "SELECT group_concat(path) FROM artifacts"), "a");
}

TEST_F(ResultsStoreTest, PluginLibrariesAreRecordedWithPathAndHash) {
  ResultsStore store(db_path());
  RunInfo info = make_run();
  info.plugins = {{"policy", "learned", "1.1.0", "/lib/htm_policy_learned.so", std::string(64, 'a')}};
  const int64_t run = store.begin_run(info);
  EXPECT_EQ(
      single(store, "SELECT path || ' ' || length(sha256) FROM run_plugins WHERE run_id = " + std::to_string(run)),
      "/lib/htm_policy_learned.so 64");
}

}  // namespace
}  // namespace htm

namespace htm {
namespace {

// A run's owner killed while its parent was gone may stay a zombie for as long as PID 1 does not
// reap it (a container's PID 1 may never): it trains nothing, so its run is not its any more.
TEST(RunOwnership, AZombieOwnsNothing) {
  const pid_t child = fork();
  if (child == 0) {
    usleep(200 * 1000);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  const RunOwner owner = RunOwner::of(child);
  EXPECT_TRUE(owner_alive(owner, 0, 0)) << "alive while it sleeps";
  usleep(600 * 1000);  // now a zombie: not reaped yet
  EXPECT_FALSE(owner_alive(owner, 0, 0));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(owner_alive(owner, 0, 0));
}

}  // namespace
}  // namespace htm
