// Tests of the SQLite results store (core/src/results_store.h).
#include "store/results_store.h"
#include "commands/table.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "htm/error.h"
#include "store_test_util.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace htm {
namespace {

TEST_F(ResultsStoreTest, CreatesSchemaAndParentDirectories) {
  std::string path = db_path("nested/deeper/htm.sqlite");
  {
    ResultsStore store(path);
    EXPECT_EQ(store.path(), path);
    QueryResult objects = store.query(
        "SELECT type || ' ' || name FROM sqlite_master "
        "WHERE type IN ('table', 'view') ORDER BY name");
    std::vector<std::string> names;
    for (const auto& row : objects.rows) names.push_back(row[0]);
    EXPECT_EQ(names, (std::vector<std::string>{
                         "table artifacts", "table experiments", "view latest_metrics", "table meta", "table metrics",
                         "table params", "table run_archived", "table run_notes", "table run_plugins",
                         "view run_summary", "table run_user_tags", "table runs", "table saved_views", "table tags"}));
    EXPECT_EQ(single(store, "SELECT value FROM meta WHERE key = 'schema_version'"), "2");
    EXPECT_EQ(single(store, "PRAGMA journal_mode"), "wal");
    EXPECT_EQ(single(store, "PRAGMA foreign_keys"), "1");
    EXPECT_EQ(single(store, "PRAGMA busy_timeout"), "30000");
  }
  EXPECT_TRUE(fs::is_regular_file(path));
  ResultsStore reopened(path);  // an existing database opens again unchanged
  EXPECT_EQ(single(reopened, "SELECT count(*) FROM meta"), "1");
}

TEST_F(ResultsStoreTest, RefusesAnotherSchemaVersion) {
  {
    ResultsStore store(db_path());
    store.query("UPDATE meta SET value = '9' WHERE key = 'schema_version'", {}, true);
  }
  std::string message = error_of([&] { ResultsStore store(db_path()); });
  EXPECT_NE(message.find(db_path()), std::string::npos) << message;
  EXPECT_NE(message.find("schema version 9"), std::string::npos) << message;
}

TEST_F(ResultsStoreTest, UncreatableLocationNamesThePath) {
  std::ofstream(dir_ / "a_file") << "not a directory";
  std::string path = (dir_ / "a_file" / "sub" / "htm.sqlite").string();
  std::string message = error_of([&] { ResultsStore store(path); });
  EXPECT_EQ(message.rfind("results database '" + path + "': ", 0), 0u) << message;
}

TEST_F(ResultsStoreTest, BeginRunRecordsRunParamsAndPlugins) {
  ResultsStore store(db_path());
  int64_t id = store.begin_run(make_run());
  int64_t second = store.begin_run(make_run("uniform", 1));
  EXPECT_NE(id, second);
  std::string where = " FROM runs WHERE id = " + std::to_string(id);
  EXPECT_EQ(single(store, "SELECT status" + where), "running");
  EXPECT_EQ(single(store, "SELECT variant || '/' || seed || '/' || config_hash" + where), "learned/0/hash-a");
  EXPECT_EQ(single(store, "SELECT length(uuid) = 32 AND uuid NOT GLOB '*[^0-9a-f]*'" + where), "1");
  EXPECT_EQ(single(store, "SELECT ended_at IS NULL AND error IS NULL" + where), "1");
  EXPECT_EQ(single(store, "SELECT started_at > 1.6e9" + where), "1");
  EXPECT_EQ(single(store, "SELECT count(DISTINCT uuid) FROM runs"), "2");
  EXPECT_EQ(single(store, "SELECT count(*) FROM experiments"), "1");
  EXPECT_EQ(single(store,
                   "SELECT e.name FROM runs r JOIN experiments e "
                   "ON e.id = r.experiment_id" +
                       std::string(" WHERE r.id = ") + std::to_string(id)),
            "quickstart");

  QueryResult params =
      store.query("SELECT key, value FROM params WHERE run_id = " + std::to_string(id) + " ORDER BY key");
  EXPECT_EQ(params.rows, (std::vector<std::vector<std::string>>{{"model.policy", "\"learned\""},
                                                                {"model.schedule", "[4, 2, 1]"},
                                                                {"train.amp", "false"},
                                                                {"train.epochs", "2"}}));
  QueryResult plugins = store.query("SELECT kind, name, version FROM run_plugins WHERE run_id = " + std::to_string(id) +
                                    " ORDER BY kind");
  EXPECT_EQ(plugins.rows, (std::vector<std::vector<std::string>>{{"merge", "mlp", "2"}, {"policy", "learned", "1"}}));
}

TEST_F(ResultsStoreTest, LatestMetricsPicksHighestStep) {
  ResultsStore store(db_path());
  int64_t id = store.begin_run(make_run());
  store.log_metrics(id, 10, 0, "train", {{"loss", 3.0}, {"mse", 0.5}});
  store.log_metrics(id, 30, 1, "train", {{"loss", 1.0}});
  store.log_metrics(id, 20, 0, "train", {{"loss", 2.0}});  // logged last, but an earlier step
  store.log_metrics(id, 30, 1, "test", {{"mse", 0.25}});
  store.log_metrics(id, 30, 1, "test", {{"mse", 0.125}});  // same step again: latest wins
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics"), "6");
  QueryResult latest = store.query("SELECT split, name, step, epoch, value FROM latest_metrics ORDER BY split, name");
  EXPECT_EQ(latest.rows, (std::vector<std::vector<std::string>>{{"test", "mse", "30", "1", "0.125"},
                                                                {"train", "loss", "30", "1", "1"},
                                                                {"train", "mse", "10", "0", "0.5"}}));

  store.add_artifact(id, "checkpoint", "results/run/ckpt_30.pt", 30);
  EXPECT_EQ(single(store, "SELECT kind || ' ' || path || ' ' || step FROM artifacts"),
            "checkpoint results/run/ckpt_30.pt 30");
}

TEST_F(ResultsStoreTest, NanIsStoredAsNull) {
  ResultsStore store(db_path());
  int64_t id = store.begin_run(make_run());
  store.log_metrics(id, 1, 0, "train", {{"loss", std::numeric_limits<double>::quiet_NaN()}});
  EXPECT_EQ(single(store, "SELECT value IS NULL FROM metrics"), "1");
}

// What a run logs after its last checkpoint is repeated by a resume: with `replace` it is
// logged once; the same file listed again is one artifact.
TEST_F(ResultsStoreTest, WhatAResumeRepeatsIsRecordedOnce) {
  ResultsStore store(db_path());
  const int64_t run = store.begin_run(make_run("learned", 0));
  const std::string id = std::to_string(run);
  for (int k = 0; k < 2; ++k) {
    store.log_metrics(run, 10, 1, "test", {{"policy_variation", 0.5 + k}, {"policy_structure", 0.1}}, true);
    store.log_metrics(run, 10, 1, "train", {{"loss", 1.0}});
    store.add_artifact(run, "image", "final.png", 10);
  }
  EXPECT_EQ(
      single(store,
             "SELECT count(*) || ' ' || max(value) FROM metrics WHERE name = 'policy_variation' AND run_id = " + id),
      "1 1.5");
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics WHERE name = 'policy_structure' AND run_id = " + id), "1");
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics WHERE name = 'loss' AND run_id = " + id), "2");  // appended
  EXPECT_EQ(single(store, "SELECT count(*) FROM artifacts WHERE run_id = " + id), "1");
}

TEST_F(ResultsStoreTest, FinishRunKeepsErrorAndMetrics) {
  ResultsStore store(db_path());
  int64_t ok = store.begin_run(make_run("learned", 0));
  int64_t bad = store.begin_run(make_run("learned", 1));
  store.log_metrics(bad, 5, 0, "train", {{"loss", 9.5}});
  store.finish_run(ok, RunStatus::finished);
  store.finish_run(bad, RunStatus::failed, "loss became NaN at step 6");

  QueryResult runs =
      store.query("SELECT id, status, ended_at >= started_at, coalesce(error, '-') FROM runs ORDER BY id");
  EXPECT_EQ(runs.rows,
            (std::vector<std::vector<std::string>>{{std::to_string(ok), "finished", "1", "-"},
                                                   {std::to_string(bad), "failed", "1", "loss became NaN at step 6"}}));
  EXPECT_EQ(single(store, "SELECT value FROM metrics WHERE run_id = " + std::to_string(bad)), "9.5");
  QueryResult summary = store.query(
      "SELECT experiment, status, started_at LIKE '____-__-__ __:__:__', duration_s >= 0, error "
      "FROM run_summary WHERE id = " +
      std::to_string(bad));
  EXPECT_EQ(summary.rows,
            (std::vector<std::vector<std::string>>{{"quickstart", "failed", "1", "1", "loss became NaN at step 6"}}));

  EXPECT_NE(error_of([&] { store.finish_run(9999, RunStatus::finished); }).find("9999"), std::string::npos);
  EXPECT_NE(error_of([&] {
              store.log_metrics(9999, 0, 0, "train", {{"loss", 1}});
            }).find("no run with id 9999"),
            std::string::npos);
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics"), "1");
}

TEST_F(ResultsStoreTest, FindFinishedMatchesOnlyFinishedRunsWithSameIdentity) {
  ResultsStore store(db_path());
  int64_t running = store.begin_run(make_run("learned", 0, "h1"));
  int64_t failed = store.begin_run(make_run("learned", 0, "h1"));
  store.finish_run(failed, RunStatus::failed, "boom");
  EXPECT_FALSE(store.find_finished("quickstart", "learned", 0, "h1"));

  int64_t done = store.begin_run(make_run("learned", 0, "h1"));
  store.finish_run(done, RunStatus::finished);
  EXPECT_EQ(store.find_finished("quickstart", "learned", 0, "h1"), done);
  EXPECT_FALSE(store.find_finished("quickstart", "learned", 0, "h2"));  // config changed
  EXPECT_FALSE(store.find_finished("quickstart", "learned", 1, "h1"));
  EXPECT_FALSE(store.find_finished("quickstart", "uniform", 0, "h1"));
  EXPECT_FALSE(store.find_finished("other", "learned", 0, "h1"));

  int64_t again = store.begin_run(make_run("learned", 0, "h1"));
  store.finish_run(again, RunStatus::finished);
  EXPECT_EQ(store.find_finished("quickstart", "learned", 0, "h1"), again);  // the latest
  (void)running;
}

TEST_F(ResultsStoreTest, QueryRendersCellsAsTextAndReportsErrors) {
  ResultsStore store(db_path());
  QueryResult result =
      store.query("SELECT 42 AS i, 2.5 AS r, 1.0 / 3 AS third, 'x' AS s, NULL AS n, 1e-7 AS tiny;  -- done\n");
  EXPECT_EQ(result.columns, (std::vector<std::string>{"i", "r", "third", "s", "n", "tiny"}));
  EXPECT_EQ(result.rows, (std::vector<std::vector<std::string>>{{"42", "2.5", "0.333333", "x", "", "1e-07"}}));
  EXPECT_TRUE(store.query("SELECT 1 WHERE 0").rows.empty());

  std::string syntax = error_of([&] { store.query("SELEC 1"); });
  EXPECT_EQ(syntax.rfind("query failed: ", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("syntax error"), std::string::npos) << syntax;
  std::string table = error_of([&] { store.query("SELECT * FROM nowhere"); });
  EXPECT_EQ(table, "query failed: no such table: nowhere");
  std::string two = error_of([&] { store.query("SELECT 1; SELECT 2"); });
  EXPECT_EQ(two.rfind("query failed: only one SQL statement", 0), 0u) << two;
  EXPECT_EQ(error_of([&] { store.query("  "); }).rfind("query failed: ", 0), 0u);
}

TEST_F(ResultsStoreTest, QueryBindsParametersSoTextStaysText) {
  ResultsStore store(db_path());
  // A value that would end a hand-quoted string literal is only ever data.
  const std::string tricky = "it's'; DROP TABLE runs; --";
  QueryResult result = store.query("SELECT ? AS t, ? AS i, ? AS r", {tricky, int64_t{7}, 0.5});
  EXPECT_EQ(result.rows, (std::vector<std::vector<std::string>>{{tricky, "7", "0.5"}}));
  EXPECT_FALSE(store.query("SELECT name FROM sqlite_master WHERE name = 'runs'").rows.empty());
  EXPECT_EQ(error_of([&] { store.query("SELECT ?, ?", {int64_t{1}}); }),
            "query failed: the statement has 2 parameters but 1 values were given");
}

TEST(FormatTable, AlignsNumbersRightAndTextLeft) {
  QueryResult result;
  result.columns = {"variant", "seed", "mse"};
  result.rows = {{"learned", "0", "0.0123"}, {"uniform", "11", ""}, {"é", "2", "1e-05"}};
  EXPECT_EQ(format_table(result),
            "variant  seed     mse\n"
            "-------  ----  ------\n"
            "learned     0  0.0123\n"
            "uniform    11\n"
            "é           2   1e-05\n");
  EXPECT_EQ(format_table(QueryResult{{"a"}, {}}), "(no rows)\n");

  QueryResult mixed{{"x"}, {{"12"}, {"a\nb"}}};  // one text cell makes the column text
  EXPECT_EQ(format_table(mixed), "x\n---\n12\na b\n");
}

// Two processes, each with its own connection, write at the same time into one fresh file.
TEST_F(ResultsStoreTest, ConcurrentProcessesLoseNothing) {
  constexpr int kRows = 300;
  std::string path = db_path("shared/htm.sqlite");
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  std::vector<pid_t> children;
  for (int child = 0; child < 2; ++child) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(gate[1]);
      char byte;
      if (read(gate[0], &byte, 1) < 0) _exit(3);  // wait until both exist: EOF opens the gate
      try {
        ResultsStore store(path);
        int64_t id = store.begin_run(make_run("learned", child));
        for (int step = 0; step < kRows; ++step) {
          store.log_metrics(id, step, step / 100, "train", {{"loss", 1.0 / (step + 1)}});
        }
        store.finish_run(id, RunStatus::finished);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "child %d: %s\n", child, error.what());
        _exit(1);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }

  ResultsStore store(path);
  EXPECT_EQ(single(store, "SELECT count(*) FROM metrics"), std::to_string(2 * kRows));
  QueryResult per_run = store.query(
      "SELECT r.seed, count(*), count(DISTINCT m.step), r.status FROM metrics m "
      "JOIN runs r ON r.id = m.run_id GROUP BY r.id ORDER BY r.seed");
  EXPECT_EQ(per_run.rows,
            (std::vector<std::vector<std::string>>{{"0", "300", "300", "finished"}, {"1", "300", "300", "finished"}}));
  EXPECT_EQ(single(store, "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(store.query("PRAGMA foreign_key_check").rows.empty());
}

TEST_F(ResultsStoreTest, MergeImportsEachRunOnce) {
  std::string source_path = db_path("host_a.sqlite");
  std::string target_path = db_path("host_b.sqlite");
  {
    ResultsStore source(source_path);
    int64_t first = source.begin_run(make_run("learned", 0));
    source.log_metrics(first, 1, 0, "test", {{"mse", 0.5}, {"loss", 0.7}});
    source.log_metrics(first, 2, 1, "test", {{"mse", 0.25}});
    source.add_artifact(first, "image", "results/a/recon.png", 2);
    source.query("INSERT INTO tags(run_id, key, value) VALUES (" + std::to_string(first) + ", 'note', 'baseline')", {},
                 true);
    source.finish_run(first, RunStatus::finished);
    int64_t second = source.begin_run(make_run("uniform", 0));
    source.finish_run(second, RunStatus::failed, "out of memory");
  }
  ResultsStore target(target_path);
  RunInfo local = make_run("learned", 7);
  local.experiment = "local-only";  // gives the shared experiment another id here
  target.finish_run(target.begin_run(local), RunStatus::finished);

  EXPECT_EQ(target.merge_from(source_path), 2);
  EXPECT_EQ(single(target, "SELECT count(*) FROM runs"), "3");
  EXPECT_EQ(single(target, "SELECT count(*) FROM experiments"), "2");
  int64_t merged = *target.find_finished("quickstart", "learned", 0, "hash-a");
  std::string of_run = " WHERE run_id = " + std::to_string(merged);
  EXPECT_EQ(single(target, "SELECT value FROM latest_metrics" + of_run + " AND name = 'mse'"), "0.25");
  EXPECT_EQ(single(target, "SELECT count(*) FROM metrics" + of_run), "3");
  EXPECT_EQ(single(target, "SELECT count(*) FROM params" + of_run), "4");
  EXPECT_EQ(single(target, "SELECT count(*) FROM run_plugins" + of_run), "2");
  EXPECT_EQ(single(target, "SELECT value FROM tags" + of_run), "baseline");
  EXPECT_EQ(single(target, "SELECT path FROM artifacts" + of_run), "results/a/recon.png");
  EXPECT_EQ(single(target, "SELECT error FROM run_summary WHERE variant = 'uniform'"), "out of memory");

  EXPECT_EQ(target.merge_from(source_path), 0);
  EXPECT_EQ(single(target, "SELECT count(*) FROM runs"), "3");
  {  // a run still being written there is left for a later merge, which then takes it whole
    ResultsStore source(source_path);
    const int64_t live = source.begin_run(make_run("learned", 1));
    source.log_metrics(live, 1, 0, "test", {{"mse", 0.9}});
    int64_t running = 0;
    EXPECT_EQ(target.merge_from(source_path, &running), 0);
    EXPECT_EQ(running, 1);
    source.log_metrics(live, 2, 0, "test", {{"mse", 0.8}});
    source.finish_run(live, RunStatus::finished);
    EXPECT_EQ(target.merge_from(source_path, &running), 1);
    EXPECT_EQ(running, 0);
    EXPECT_EQ(single(target, "SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.seed = 1"), "2");
    target.query("DELETE FROM metrics WHERE run_id IN (SELECT id FROM runs WHERE seed = 1)", {}, true);
    target.query("DELETE FROM params WHERE run_id IN (SELECT id FROM runs WHERE seed = 1)", {}, true);
    target.query("DELETE FROM run_plugins WHERE run_id IN (SELECT id FROM runs WHERE seed = 1)", {}, true);
    target.query("DELETE FROM runs WHERE seed = 1", {}, true);
  }
  EXPECT_EQ(single(target, "SELECT count(*) FROM runs"), "3");
  EXPECT_EQ(single(target, "SELECT count(*) FROM metrics"), "3");
  EXPECT_EQ(single(target, "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(target.query("PRAGMA foreign_key_check").rows.empty());
  EXPECT_EQ(single(target,
                   "SELECT count(*) FROM pragma_database_list WHERE name != 'main' "
                   "AND name != 'temp'"),
            "0");  // the source was detached

  EXPECT_NE(error_of([&] { target.merge_from(target_path); }).find("same database"), std::string::npos);
  std::string missing = db_path("missing.sqlite");
  EXPECT_NE(error_of([&] { target.merge_from(missing); }).find("no such file"), std::string::npos);
  EXPECT_FALSE(fs::exists(missing));
  std::ofstream(db_path("empty.sqlite")).flush();
  EXPECT_NE(error_of([&] { target.merge_from(db_path("empty.sqlite")); }).find("not an htm results database"),
            std::string::npos);
}

}  // namespace
}  // namespace htm
