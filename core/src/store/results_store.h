// SQLite results store: experiments, runs, params, metrics, artifacts (schema in docs/results.md).
// results_store.cpp writes and reads runs, merge.cpp imports another database, sqlite.h wraps
// the C API.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "htm/value.h"
#include "store/metric.h"

struct sqlite3;

namespace htm {

enum class RunStatus { running, finished, failed, interrupted };
const char* status_name(RunStatus status);

struct PluginVersion {
  std::string kind, name, version;
};

/// Everything recorded when a run starts.
struct RunInfo {
  std::string experiment;     ///< experiment name (from the file's [experiment] name)
  std::string source_file;    ///< path of the experiment file
  std::string variant;
  int64_t seed = 0;
  std::string config_toml;    ///< the fully resolved config
  std::string config_hash;    ///< hash of config_toml; with experiment/variant/seed identifies a run
  std::string git_revision;
  std::string torch_version;
  std::string htm_version;
  std::string host;
  std::string artifact_dir;
  std::map<std::string, Value> params;  ///< flattened resolved config ("train.lr" -> 0.0001)
  std::vector<PluginVersion> plugins;
};

/// Result of an arbitrary query, every cell rendered as text (NULL as "").
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

/// A value bound to a `?` of a query: user input never becomes SQL text.
using SqlValue = std::variant<int64_t, double, std::string>;

/// One open database. Safe to use from several processes at once (WAL + busy timeout);
/// an instance is not shared between threads.
class ResultsStore {
 public:
  /// Opens or creates the database and its schema. Throws htm::Error with the path on failure.
  explicit ResultsStore(const std::string& path);
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  /// Records a new run with status `running`; returns its id.
  int64_t begin_run(const RunInfo& info);
  /// Appends metrics of one step in one transaction.
  void log_metrics(int64_t run_id, int64_t step, int64_t epoch, const std::string& split,
                   const std::vector<Metric>& metrics);
  void add_artifact(int64_t run_id, const std::string& kind, const std::string& path,
                    int64_t step);
  /// Sets the final status, end time and (for failures) the error message.
  void finish_run(int64_t run_id, RunStatus status, const std::string& error = "");
  /// Id of a finished run with this identity, if any (lets a sweep skip what is done).
  std::optional<int64_t> find_finished(const std::string& experiment, const std::string& variant,
                                       int64_t seed, const std::string& config_hash);
  /// Runs one SQL statement with `params` bound to its `?`s in order; throws htm::Error
  /// carrying SQLite's message on failure, or when more than one statement is given.
  QueryResult query(const std::string& sql, const std::vector<SqlValue>& params = {});
  /// Copies every run of another database that this one lacks (matched by run uuid).
  /// Returns the number of runs imported.
  int64_t merge_from(const std::string& other_path);

  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql);
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace htm
