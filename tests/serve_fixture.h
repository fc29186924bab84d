// The database the htm serve tests read (tests/serve_test.cpp, tests/serve_live_test.cpp): two
// studies written by hand, and helpers to read the JSON.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "store_test_util.h"
#include "web/serve.h"

namespace htm {

class ServeTest : public ResultsStoreTest {
 protected:
  // Two studies: "sweep" (a: seeds 0-2, sweep.width 32, sweep.kind learned, final test/mse 1 2 3; b:
  // width 64, random, 4 5 6; b seed 9 tagged phase=confirm, 7) and "other" (one failed run).
  void SetUp() override {
    ResultsStoreTest::SetUp();
    ResultsStore store(db_path());
    const std::vector<std::pair<std::string, std::vector<double>>> values = {{"a", {1, 2, 3}}, {"b", {4, 5, 6}}};
    for (const auto& [variant, finals] : values)
      for (size_t seed = 0; seed < finals.size(); ++seed) {
        RunInfo info = make_run(variant, static_cast<int64_t>(seed));
        info.experiment = "sweep";
        info.params["sweep.width"] = int64_t{variant == "a" ? 32 : 64};
        info.params["sweep.kind"] = std::string(variant == "a" ? "learned" : "random");
        info.artifact_dir = (dir_ / ("runs/" + variant + std::to_string(seed))).string();
        const int64_t id = store.begin_run(info);
        store.log_metrics(id, 1, 0, "train", {{"loss", 10.0 + finals[seed]}});
        store.log_metrics(id, 2, 1, "test", {{"mse", finals[seed]}});
        store.finish_run(id, RunStatus::finished);
        ids_.push_back(id);
      }
    RunInfo confirm = make_run("b", 9);
    confirm.experiment = "sweep";
    confirm.params["sweep.kind"] = std::string("random");
    const int64_t confirmed = store.begin_run(confirm);
    store.log_metrics(confirmed, 2, 1, "test", {{"mse", 7.0}});
    store.set_tags(confirmed, {{"phase", "confirm"}});
    store.finish_run(confirmed, RunStatus::finished);
    RunInfo other = make_run("x", 0);
    other.experiment = "other";
    store.finish_run(store.begin_run(other), RunStatus::failed, "boom <script>alert(1)</script>");
  }

  std::string runs(serve::RunsQuery q) {
    ResultsStore store(db_path(), OpenMode::read_only);
    return serve::runs_json(store, q);
  }
  // Why the runs table refuses `q` (BadRequest's text), or "(accepted)".
  std::string refusal(serve::RunsQuery q) {
    try {
      runs(q);
    } catch (const BadRequest& e) {
      return e.what();
    }
    return "(accepted)";
  }
  static int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
    return n;
  }
  static std::string total(const std::string& json) {
    std::smatch m;
    return std::regex_search(json, m, std::regex("\"total\":(\\d+)")) ? m[1].str() : "?";
  }

  std::vector<int64_t> ids_;
};

}  // namespace htm
