// htm serve: the JSON behind its pages (filters, live rows, the sweep's variance table, a study's
// curves) against a database written by hand (serve_fixture.h). The live server:
// serve_live_test.cpp.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <regex>
#include <thread>

#include "serve_fixture.h"
#include "store/names.h"
#include "web/report.h"
#include "web/serve.h"
#include "web/serve_series.h"

namespace htm {
namespace {

TEST_F(ServeTest, RunsFilterBySettingMetricTagStatusAndExperiment) {
  serve::RunsQuery q;
  EXPECT_EQ(total(runs(q)), "8");
  q.experiment = "sweep";
  EXPECT_EQ(total(runs(q)), "7");
  q.where = {"test/mse<2.5"};  // a final metric: seeds 0 and 1 of a
  EXPECT_EQ(total(runs(q)), "2");
  q.where = {"test/mse>=2", "sweep.width=64"};  // a setting, as TOML text or unquoted
  EXPECT_EQ(total(runs(q)), "3");
  q.where = {"sweep.kind=learned"};
  EXPECT_EQ(total(runs(q)), "3");
  q.where = {"sweep.kind!=learned"};  // runs without the setting are "not learned" too
  EXPECT_EQ(total(runs(q)), "4");
  q.where = {"tag.phase=confirm"};
  EXPECT_EQ(total(runs(q)), "1");
  q.where = {"variant~b", "seed=9"};
  EXPECT_EQ(total(runs(q)), "1");
  q = {};
  q.status = "failed";
  const std::string failed = runs(q);
  EXPECT_EQ(total(failed), "1");
  EXPECT_EQ(failed.find("<script>"), std::string::npos) << "a database value reached the JSON unescaped";
  EXPECT_NE(failed.find("\\u003cscript>"), std::string::npos);
}

TEST_F(ServeTest, RunsSortByAFinalMetricAndPage) {
  serve::RunsQuery q;
  q.experiment = "sweep";
  q.sort = "test/mse";
  q.descending = false;
  q.size = 2;
  const std::string first = runs(q);
  EXPECT_EQ(total(first), "7");
  EXPECT_EQ(count(first, "\"variant\":"), 2);
  EXPECT_LT(first.find("\"test/mse\":1"), first.find("\"test/mse\":2")) << first;
  q.page = 3;  // the 7th run alone: the largest final MSE
  const std::string last = runs(q);
  EXPECT_EQ(count(last, "\"variant\":"), 1);
  EXPECT_NE(last.find("\"test/mse\":7"), std::string::npos) << last;
}

TEST_F(ServeTest, BadFiltersAndSortsAreRefusedWithTheirText) {
  serve::RunsQuery q;
  q.where = {"test/mse"};
  EXPECT_THROW(runs(q), BadRequest);
  q.where = {"test/mse<small"};
  try {
    runs(q);
    FAIL() << "a non-number after < was accepted";
  } catch (const BadRequest& e) {
    EXPECT_NE(std::string(e.what()).find("needs a number, got 'small'"), std::string::npos) << e.what();
  }
  q.where = {"x' OR 1=1 --=1"};  // a key is bound, never SQL: it is a setting nobody has, refused as such
  try {
    runs(q);
    FAIL() << "a setting no run has was accepted";
  } catch (const BadRequest& e) {
    EXPECT_NE(std::string(e.what()).find("no run has a setting 'x' OR 1'"), std::string::npos) << e.what();
  }
  q.where = {};
  q.sort = "id; DROP TABLE runs";
  EXPECT_THROW(runs(q), BadRequest);
}

TEST_F(ServeTest, RunRowsAfterARowidAreWhatThePagePollsFor) {
  ResultsStore writer(db_path());
  const int64_t id = ids_.front();
  ResultsStore reader(db_path(), OpenMode::read_only);
  const std::string first = serve::run_json(reader, id, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(first, m, std::regex("\"last\":(\\d+)")));
  const int64_t last = std::stoll(m[1]);
  EXPECT_EQ(count(first, "\"train/loss\""), 1);
  EXPECT_NE(first.find("\"params\":[["), std::string::npos);
  // The run's numbers are numbers, as in /api/runs.
  EXPECT_NE(first.find("{\"id\":" + std::to_string(id) + ",\"experiment\""), std::string::npos) << first;
  EXPECT_TRUE(std::regex_search(first, std::regex("\"seed\":(\\d+|null),\"status\"")));
  EXPECT_TRUE(std::regex_search(first, std::regex("\"started\":[0-9.e+]+,\"ended\":[0-9.e+]+,")));
  writer.log_metrics(id, 3, 1, "train", {{"loss", 0.5}});  // written while the reader is open
  const std::string next = serve::run_json(reader, id, last);
  EXPECT_EQ(count(next, "\"train/loss\""), 1) << next;
  // [rowid, metric, step, value, time (s since 1970), epoch]: the charts' three x axes
  EXPECT_TRUE(std::regex_search(next, std::regex(",3,0\\.5,1[0-9]{9}(\\.[0-9]+)?,1\\]"))) << next;
  EXPECT_NE(next.find("\"params\":null"), std::string::npos);
  EXPECT_THROW(serve::run_json(reader, 999, 0), BadRequest);
}

// A training run's series are read whole once, then only the rows logged since, appended: what the
// page gets is what a whole read gives (the same run read again once it is finished), through new
// rows, a new metric, a resume that drops rows and logs earlier steps again, and rows of another run.
TEST_F(ServeTest, ARunningRunsSeriesGrowAsAWholeReadWouldGive) {
  ResultsStore writer(db_path());
  RunInfo info = make_run("live", 0);
  info.experiment = "live";
  const int64_t id = writer.begin_run(info);
  ResultsStore reader(db_path(), OpenMode::read_only);
  serve::SeriesQuery q;
  q.points = 50;
  q.smooth = 0.5;
  int ends = 0;
  const auto whole = [&] {  // the run finished for a moment (another end each time: no cached read), then running again
    writer.query("UPDATE runs SET status = 'finished', ended_at = ? WHERE id = ?", {++ends, id}, true);
    const std::string all = serve::series_json(reader, id, q);
    writer.query("UPDATE runs SET status = 'running', ended_at = NULL WHERE id = ?", {id}, true);
    return all;
  };
  for (int64_t step = 1; step <= 100; ++step) writer.log_metrics(id, step, 0, "train", {{"loss", 1.0 / step}});
  const std::string first = serve::series_json(reader, id, q);  // read whole, kept
  EXPECT_EQ(first, whole());
  for (int64_t step = 101; step <= 140; ++step) {
    writer.log_metrics(id, step, 1, "train", {{"loss", 1.0 / step}});
    if (step % 10 == 0) writer.log_metrics(id, step, 1, "test", {{"mse", 0.01 * step}});  // a new series
    writer.log_metrics(ids_[0], step, 1, "train", {{"loss", 2.0}});                       // another run's rows
  }
  const int64_t reads = serve::whole_series_reads();
  const std::string grown = serve::series_json(reader, id, q);  // appended, not read whole
  EXPECT_EQ(serve::whole_series_reads(), reads);
  EXPECT_NE(grown, first);
  EXPECT_EQ(grown, whole());
  EXPECT_EQ(count(grown, "\"metric\":\"test/mse\""), 1) << grown;
  writer.truncate_after(id, 120);  // resumed from step 120: its later rows dropped, logged again
  for (int64_t step = 121; step <= 125; ++step) writer.log_metrics(id, step, 1, "train", {{"loss", 0.5 / step}});
  const std::string resumed = serve::series_json(reader, id, q);  // read whole again
  EXPECT_EQ(serve::whole_series_reads(), reads + 2);              // (the whole() between)
  EXPECT_EQ(resumed, whole());
  EXPECT_NE(resumed.find("\"total\":125"), std::string::npos) << resumed;
}

TEST_F(ServeTest, RunsGroupedBySettingGiveMeanSdAndN) {
  serve::RunsQuery q;
  q.experiment = "sweep";
  q.where = {"seed<5"};  // not the confirmation run (seed 9)
  q.columns = {"test/mse"};
  q.group = "sweep.kind";  // a: 1 2 3 (learned), b: 4 5 6 (random)
  const std::string json = runs(q);
  EXPECT_NE(json.find("\"group\":\"sweep.kind\""), std::string::npos) << json;
  EXPECT_NE(json.find("{\"value\":\"\\\"learned\\\"\",\"n\":3,\"stats\":{\"test/mse\":[3,2,1]}}"), std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"value\":\"\\\"random\\\"\",\"n\":3,\"stats\":{\"test/mse\":[3,5,1]}}"), std::string::npos)
      << json;
  q.group = "variant";
  q.where = {};
  EXPECT_NE(runs(q).find("{\"value\":\"b\",\"n\":4,\"stats\":{\"test/mse\":[4,5.5,1.29099444873581]}}"),
            std::string::npos);
  q.group = "test/mse";
  EXPECT_THROW(runs(q), BadRequest);
}

TEST_F(ServeTest, AMisspeltSettingIsRefusedWithTheNearestOne) {
  serve::RunsQuery q;
  q.where = {"sweep.knd=learned"};
  try {
    runs(q);
    FAIL() << "a misspelt setting matched nothing silently";
  } catch (const BadRequest& e) {
    EXPECT_NE(std::string(e.what()).find("no run has a setting 'sweep.knd'; did you mean 'sweep.kind'?"),
              std::string::npos)
        << e.what();
  }
  q.where = {"sweep.kind=nothing"};  // a setting runs have, a value none has: no rows, no error
  EXPECT_EQ(total(runs(q)), "0");
}

// Every name a request gives (a filter's key, a group, a sort, a column) that no run in the file
// has is refused with the closest real one, even where it would match every run (!=); a real
// name that the selected runs lack is not an error.
TEST_F(ServeTest, MisspeltNamesAreRefusedWhereverTheyAreGiven) {
  serve::RunsQuery q;
  q.where = {"sweep.knd!=learned"};  // matched all 8 runs before
  EXPECT_EQ(refusal(q), "filter 'sweep.knd!=learned': no run has a setting 'sweep.knd'; did you mean 'sweep.kind'?");
  q.where = {"varaint=a"};
  EXPECT_EQ(refusal(q), "filter 'varaint=a': no run has a setting 'varaint'; did you mean 'variant'?");
  q.where = {"tag.phse!=confirm"};
  EXPECT_EQ(refusal(q), "filter 'tag.phse!=confirm': no run has a tag 'phse'; did you mean 'tag.phase'?");
  q.where = {"test/mes<3"};
  EXPECT_EQ(refusal(q), "filter 'test/mes<3': no run logged a metric 'test/mes'; did you mean 'test/mse'?");
  q.where = {};
  q.group = "sweep.knd";  // was one "(unset)" group
  EXPECT_EQ(refusal(q), "group 'sweep.knd': no run has a setting 'sweep.knd'; did you mean 'sweep.kind'?");
  q.group = "";
  q.sort = "test/mes";
  EXPECT_EQ(refusal(q), "sort 'test/mes': no run logged a metric 'test/mes'; did you mean 'test/mse'?");
  q.sort = "varaint";
  EXPECT_NE(refusal(q).find("; did you mean 'variant'?"), std::string::npos) << refusal(q);
  q.sort = "id";
  q.columns = {"test/mes"};
  EXPECT_EQ(refusal(q), "column 'test/mes': no run logged a metric 'test/mes'; did you mean 'test/mse'?");
  // Real names the selected runs lack: as before.
  q = {};
  q.experiment = "other";  // its one run has no sweep.* setting and no metric
  q.where = {"sweep.kind!=learned"};
  q.columns = {"train/loss"};
  q.group = "sweep.width";
  const std::string json = runs(q);
  EXPECT_EQ(total(json), "1");
  EXPECT_NE(json.find("{\"value\":\"(unset)\",\"n\":1,"), std::string::npos) << json;
  q.where = {"sweep.kind!=learned"};
  q.experiment = "";
  EXPECT_EQ(total(runs(q)), "5");
}

// Settings as columns of the runs table (typed JSON), sorted as numbers, filtered by a number in
// any spelling, and a chart's points over every selected run; a misspelt one named.
TEST_F(ServeTest, SettingsAsColumnsSortAsNumbersAndFeedAChart) {
  {
    ResultsStore store(db_path());
    RunInfo wide = make_run("c", 0);
    wide.experiment = "sweep";
    wide.params["sweep.width"] = int64_t{128};  // after 64 as a number, before it as text
    wide.params["sweep.lr"] = 1e-4;
    store.finish_run(store.begin_run(wide), RunStatus::finished);
  }
  serve::RunsQuery q;
  q.experiment = "sweep";
  q.columns = {"sweep.width", "sweep.kind", "variant"};  // a runs column is shown anyway
  q.sort = "sweep.width";
  q.descending = false;
  const std::string json = runs(q);
  EXPECT_NE(json.find("\"setting_columns\":[\"sweep.width\",\"sweep.kind\"]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"settings\":{\"sweep.width\":32,\"sweep.kind\":\"learned\"}"), std::string::npos) << json;
  std::string widths;
  const std::regex width("\"sweep.width\":(\\d+)");
  for (std::sregex_iterator m(json.begin(), json.end(), width), end; m != end; ++m) widths += (*m)[1].str() + " ";
  EXPECT_EQ(widths, "32 32 32 64 64 64 128 ");  // then the run without it
  EXPECT_NE(json.find("\"settings\":{\"sweep.kind\":\"random\"}}]"), std::string::npos) << "last: no width";
  q = {};
  q.where = {"sweep.lr=0.0001"};  // stored as 1e-04
  EXPECT_EQ(total(runs(q)), "1");
  q.where = {"sweep.width=64.0"};
  EXPECT_EQ(total(runs(q)), "3");
  q.where = {"sweep.width!=64"};  // the runs without it too
  EXPECT_EQ(total(runs(q)), "6");
  q = {};
  q.experiment = "sweep";
  q.size = 1;  // the chart takes every selected run, not the page's
  q.chart = {"sweep.width", "test/mse", "sweep.kind"};
  const std::string chart = runs(q);
  EXPECT_NE(chart.find("\"keys\":[\"sweep.width\",\"test/mse\",\"sweep.kind\"]"), std::string::npos) << chart;
  EXPECT_NE(chart.find("[" + std::to_string(ids_[0]) + ",32,1,\"learned\"]"), std::string::npos) << chart;
  EXPECT_EQ(count(chart.substr(chart.find("\"chart\":")), "],["), 7);  // the 8 runs of "sweep"
  q = {};
  q.columns = {"sweep.widht"};
  EXPECT_EQ(refusal(q), "column 'sweep.widht': no run has a setting 'sweep.widht'; did you mean 'sweep.width'?");
  q.columns = {};
  q.sort = "sweep.knd";
  EXPECT_EQ(refusal(q), "sort 'sweep.knd': no run has a setting 'sweep.knd'; did you mean 'sweep.kind'?");
  q.sort = "id";
  q.chart = {"sweep.width", "test/mes"};
  EXPECT_EQ(refusal(q), "chart 'test/mes': no run logged a metric 'test/mes'; did you mean 'test/mse'?");
}

TEST(ClosestName, ASwapOrALetterMoreOrLessIsCloseAndAnUnrelatedWordIsNot) {
  EXPECT_EQ(edit_distance("mes", "mse"), 1u);  // two neighbours swapped: one edit
  EXPECT_EQ(closest_name("polcy.plugin", {"policy.plugin", "policy.temperature"}), "policy.plugin");
  EXPECT_EQ(closest_name("sibling_f", {"test/sibling_f1", "sibling_f1", "cluster_f1"}), "sibling_f1");
  EXPECT_EQ(closest_name("nope", {"mse", "id", "seed"}), "");
  EXPECT_EQ(did_you_mean("varaint", {"variant"}), "; did you mean 'variant'?");
}

TEST_F(ServeTest, WhatIsNotThereIsNotFoundAndAMisspeltSweepMetricIsNamed) {
  ResultsStore store(db_path(), OpenMode::read_only);
  EXPECT_THROW(serve::run_json(store, 999, 0), NotFound);
  EXPECT_THROW(serve::study_version(store, "nope"), NotFound);
  try {
    serve::sweep_json(store, "swep", "test/mse", "explore");
    FAIL() << "a sweep of a study that is not there";
  } catch (const NotFound& e) {
    EXPECT_EQ(std::string(e.what()), "no study 'swep' in this database; did you mean 'sweep'?");
  }
  try {
    serve::sweep_json(store, "sweep", "test/mes", "explore");
    FAIL() << "a sweep of a metric no run logged";
  } catch (const NotFound&) {
    FAIL() << "a misspelt metric is a bad request, not a missing study";
  } catch (const BadRequest& e) {
    EXPECT_NE(std::string(e.what()).find("logged test/mes; did you mean 'test/mse'?"), std::string::npos) << e.what();
  }
}

// Reference: scipy.stats.f_oneway([1, 2, 3], [4, 5, 6]) (scipy 1.10.1) gives F = 13.5,
// p = 0.021311641128756727; eta squared = 13.5 / 17.5 (between over total sums of squares).
TEST_F(ServeTest, SweepVarianceSharesMatchAOneWayAnova) {
  ResultsStore store(db_path(), OpenMode::read_only);
  const std::string sweep = serve::sweep_json(store, "sweep", "test/mse", "explore");
  EXPECT_EQ(count(sweep, "{\"id\":"), 6) << "the confirmation run is not pooled with exploration";
  for (const std::string& setting : {"variant", "sweep.width", "sweep.kind"}) {
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(sweep, m,
                          std::regex("\\{\"setting\":\"" + std::regex_replace(setting, std::regex("\\."), "\\.") +
                                     "\",\"levels\":2,\"eta2\":([0-9.e-]+),\"p\":([0-9.e-]+)\\}")))
        << setting << ": " << sweep;
    EXPECT_NEAR(std::stod(m[1]), 13.5 / 17.5, 1e-12) << setting;
    EXPECT_NEAR(std::stod(m[2]), 0.021311641128756727, 1e-9) << setting;
  }
  EXPECT_EQ(sweep.find("\"setting\":\"train.epochs\""), std::string::npos) << "a setting that does not vary";
  const std::string confirm = serve::sweep_json(store, "sweep", "test/mse", "confirm");
  EXPECT_EQ(count(confirm, "{\"id\":"), 1);
  EXPECT_THROW(serve::sweep_json(store, "sweep", "test/nothing", "explore"), BadRequest);
  EXPECT_THROW(serve::sweep_json(store, "sweep", "test/mse", "both"), BadRequest);
}

// A study page starts with its main curves (and the references drawn on them) and names the others,
// which it reads from /api/study/NAME/curves once those are drawn: each metric once, in full, in
// one of the two answers.
TEST_F(ServeTest, AStudyPageHoldsItsMainCurvesAndNamesTheRestForLater) {
  {
    ResultsStore store(db_path());
    store.log_metrics(ids_[0], 1, 0, "train", {{"grad_norm", 0.5}});
    store.log_metrics(ids_[0], 2, 1, "test", {{"random/mse", 9.0}});
  }
  ResultsStore store(db_path(), OpenMode::read_only);
  const auto curve = [](const std::string& json, const std::string& metric) {
    const size_t at = json.find("{\"metric\":\"" + metric + "\"");
    return at == std::string::npos ? std::string("absent") : json.substr(at, json.find('}', at) - at + 1);
  };
  ReportRequest request;
  request.experiment = "sweep";
  request.curves = ReportCurves::main;
  const std::string first = report_data(store, request);
  EXPECT_NE(curve(first, "train/loss").find("\"main\":true,\"log\":false,\"series\":[{\"variant\":\"a\""),
            std::string::npos)
      << first;
  EXPECT_NE(curve(first, "test/mse").find("\"series\""), std::string::npos);
  EXPECT_NE(curve(first, "test/random/mse").find("\"main\":false,\"log\":false,\"series\""), std::string::npos)
      << "a reference comes with the curve it is drawn on";
  EXPECT_EQ(curve(first, "train/grad_norm"), "{\"metric\":\"train/grad_norm\",\"deferred\":true}");
  EXPECT_NE(first.find("\"finals\":"), std::string::npos);

  request.curves = ReportCurves::rest;
  const std::string rest = report_data(store, request);
  EXPECT_EQ(rest.rfind("{\"experiment\":\"sweep\",\"curves\":[{\"metric\":\"train/grad_norm\",\"main\":false", 0), 0)
      << rest;
  EXPECT_EQ(count(rest, "{\"metric\":"), 1) << rest;
  EXPECT_NE(rest.find("\"mean\":[0.5]"), std::string::npos) << rest;

  request.curves = ReportCurves::all;  // a file and the JSON route: every curve in full
  const std::string all = report_data(store, request);
  EXPECT_EQ(count(all, "\"deferred\""), 0);
  for (const char* metric : {"train/loss", "test/mse", "test/random/mse", "train/grad_norm"})
    EXPECT_NE(curve(all, metric).find("\"series\""), std::string::npos) << metric;
}

TEST_F(ServeTest, ArtifactsAreServedOnlyFromTheRunsOwnFolder) {
  const fs::path folder = dir_ / "runs/a0";
  fs::create_directories(folder / "pictures");
  std::ofstream(folder / "pictures/recon.png") << "png";
  std::ofstream(dir_ / "secret.txt") << "secret";
  fs::create_symlink(dir_ / "secret.txt", folder / "link.txt");
  ResultsStore store(db_path(), OpenMode::read_only);
  const int64_t id = ids_.front();
  const ArtifactTrust trust;
  // Made by hand, not by htm run: no marker above it, so nothing of it is served.
  EXPECT_EQ(serve::artifact_path(store, id, "pictures/recon.png", trust).verdict, ArtifactPath::Verdict::untrusted);
  EXPECT_NE(serve::run_json(store, id, 0, 10, trust)
                .find("\"artifacts_refused\":\"run " + std::to_string(id) + "'s artifact folder"),
            std::string::npos);
  mark_artifacts_root((dir_ / "runs").string());
  EXPECT_EQ(serve::artifact_path(store, id, "pictures/recon.png", trust).path,
            fs::canonical(folder / "pictures/recon.png").string());
  EXPECT_NE(serve::run_json(store, id, 0, 10, trust).find("\"artifacts_refused\":null"), std::string::npos);
  for (const std::string bad :
       {"../secret.txt", "pictures/../../secret.txt", "link.txt", "/etc/passwd", "", "pictures", "nothing.png"})
    EXPECT_EQ(serve::artifact_path(store, id, bad, trust).verdict, ArtifactPath::Verdict::absent) << bad;
  EXPECT_EQ(serve::artifact_path(store, ids_.back() + 5, "pictures/recon.png", trust).refusal,
            "no run " + std::to_string(ids_.back() + 5) + " in this database");
  // A run whose row names a folder outside, as a merged database may: refused, though it exists.
  ResultsStore writable(db_path());
  writable.query("UPDATE runs SET artifact_dir = ? WHERE id = ?", {dir_.string(), id}, true);
  EXPECT_EQ(serve::artifact_path(store, id, "secret.txt", trust).verdict, ArtifactPath::Verdict::untrusted);
  EXPECT_EQ(serve::artifact_path(store, id, "secret.txt", ArtifactTrust({dir_.string()})).path,
            fs::canonical(dir_ / "secret.txt").string())
      << "a root given with --artifacts";
}

// Chart.js is read from the file named, else the one HTM_CHART_JS names (a GPU machine's unpacked
// prefix: scripts/gpu/offline-deps.sh), else Debian's; a missing file is named in the error.
TEST_F(ServeTest, ChartJsComesFromTheFileNamedThenHtmChartJsThenDebian) {
  const auto mine = dir_ / "chart.min.js";
  std::ofstream(mine) << "/* mine */";
  const char* before = std::getenv("HTM_CHART_JS");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("HTM_CHART_JS", mine.c_str(), 1);
  EXPECT_EQ(chart_js_source(), "/* mine */");
  EXPECT_EQ(chart_js_source(mine.string()), "/* mine */");
  ::setenv("HTM_CHART_JS", (dir_ / "absent.js").c_str(), 1);
  try {
    chart_js_source();
    ADD_FAILURE() << "a missing HTM_CHART_JS file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.js"), std::string::npos) << e.what();
  }
  if (before != nullptr)
    ::setenv("HTM_CHART_JS", saved.c_str(), 1);
  else
    ::unsetenv("HTM_CHART_JS");
}

}  // namespace
}  // namespace htm
