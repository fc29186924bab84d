// The results store tests' shared fixture: a scratch folder per test, a typical run, and
// one-cell queries.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "htm/error.h"
#include "store/results_store.h"
#include "test_util.h"

namespace htm {
namespace fs = std::filesystem;

class ResultsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "htm_results_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { htm::testing::remove_tree(dir_); }

  std::string db_path(const std::string& name = "htm.sqlite") const { return (dir_ / name).string(); }

  fs::path dir_;
};

inline RunInfo make_run(const std::string& variant = "learned", int64_t seed = 0, const std::string& hash = "hash-a") {
  RunInfo info;
  info.experiment = "quickstart";
  info.source_file = "experiments/quickstart.toml";
  info.variant = variant;
  info.seed = seed;
  info.config_toml = "[train]\nepochs = 2\n";
  info.config_hash = hash;
  info.git_revision = "abc123";
  info.torch_version = "1.13.0";
  info.htm_version = "0.1.0";
  info.host = "testhost";
  info.params = {{"train.epochs", int64_t{2}},
                 {"model.policy", std::string("learned")},
                 {"train.amp", false},
                 {"model.schedule", std::vector<int64_t>{4, 2, 1}}};
  info.plugins = {{"policy", "learned", "1"},
                  {"merge", "mlp", "2"},
                  {"merge", "mlp", "2"}};  // one plugin filling two slots is recorded once
  return info;
}

inline std::string single(ResultsStore& store, const std::string& sql) {
  QueryResult result = store.query(sql);
  EXPECT_EQ(result.rows.size(), 1u) << sql;
  EXPECT_EQ(result.columns.size(), 1u) << sql;
  return result.rows.empty() || result.rows[0].empty() ? "<none>" : result.rows[0][0];
}

template <typename F>
inline std::string error_of(F&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "<no error>";
}

}  // namespace htm
