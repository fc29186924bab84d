// `htm compare`'s study comparison on a database written by hand: phases apart, tests paired by
// seed where the seeds match, Holm over variants × metrics, targets, margins, collapses and
// warnings.
#include <cmath>

#include "store_test_util.h"
#include "study/comparison.h"

namespace htm {
namespace {

class CompareStudyTest : public ResultsStoreTest {
 protected:
  // A finished run of `variant` on `seed` whose metrics end at `values` (name → value); `peak`
  // is logged one step earlier for cluster_f1 when given.
  void add(ResultsStore& store, const std::string& variant, int64_t seed, std::map<std::string, double> values,
           const std::string& phase = "", const std::string& hash = "hash-a", double peak = NAN) {
    const int64_t id = store.begin_run(make_run(variant, seed, hash));
    if (!std::isnan(peak)) store.log_metrics(id, 1, 0, "test", {{"cluster_f1", peak}});
    std::vector<Metric> metrics;
    for (const auto& [name, value] : values) metrics.push_back({name, value});
    store.log_metrics(id, 2, 1, "test", metrics);
    if (!phase.empty()) store.set_tags(id, {{"phase", phase}});
    store.finish_run(id, RunStatus::finished);
  }
  static const CompareRow& row(const PhaseTable& table, const std::string& variant) {
    for (const auto& r : table.rows)
      if (r.variant == variant) return r;
    throw std::runtime_error("no row " + variant);
  }
};

const std::vector<double> kRandom = {0.757, 0.771, 0.745, 0.790, 0.760};
const std::vector<double> kLearned = {0.881, 0.899, 0.932, 0.905, 0.870};

TEST_F(CompareStudyTest, PhasesAreNeverPooledAndSharedSeedsArePaired) {
  ResultsStore store(db_path());
  for (int64_t s = 0; s < 5; ++s) {
    add(store, "random", s, {{"cluster_f1", kRandom[s]}});
    add(store, "learned", s, {{"cluster_f1", kLearned[s]}});
  }
  for (int64_t s = 1000; s < 1003; ++s) {  // confirmation: lower, and random on other seeds
    add(store, "learned", s, {{"cluster_f1", 0.80 + 0.01 * (s - 1000)}}, "confirm");
    add(store, "random", s + 3, {{"cluster_f1", 0.70 + 0.02 * (s - 1000)}}, "confirm");
  }
  CompareRequest request;
  request.experiment = "quickstart";
  request.metrics = {"test/cluster_f1"};
  request.reference = "random";
  const Comparison c = compare_study(store, request);
  ASSERT_EQ(c.metrics.size(), 1u);
  ASSERT_EQ(c.metrics[0].phases.size(), 2u);
  const PhaseTable& explore = c.metrics[0].phases[0];
  const PhaseTable& confirm = c.metrics[0].phases[1];
  EXPECT_EQ(explore.phase, "explore");
  EXPECT_EQ(confirm.phase, "confirm");
  const CompareRow& e = row(explore, "learned");
  EXPECT_EQ(e.values.size(), 5u);
  EXPECT_EQ(e.test.kind, stats::TestKind::paired);  // the same five seeds: scipy's ttest_rel
  EXPECT_NEAR(e.test.p, 0.0006739723560863108, 1e-12);
  EXPECT_NEAR(e.effect.percent, 17.368558723515548, 1e-9);
  const CompareRow& k = row(confirm, "learned");
  EXPECT_EQ(k.values.size(), 3u);  // not pooled with the five exploration seeds
  EXPECT_NEAR(k.mean, 0.81, 1e-12);
  EXPECT_EQ(k.test.kind, stats::TestKind::welch);  // random ran other seeds there
  EXPECT_NEAR(k.test.diff, 0.81 - 0.72, 1e-12);
  EXPECT_TRUE(row(confirm, "random").reference);
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(CompareStudyTest, HolmAdjustsOverVariantsTimesMetricsOfOnePhase) {
  ResultsStore store(db_path());
  for (int64_t s = 0; s < 4; ++s) {
    add(store, "random", s, {{"a", 1.0 + 0.1 * s}, {"b", 2.0 - 0.1 * s}});
    add(store, "x", s, {{"a", 1.05 + 0.1 * s + 0.01 * (s % 2)}, {"b", 2.3 - 0.12 * s}});
    add(store, "y", s, {{"a", 0.9 + 0.11 * s}, {"b", 2.0 - 0.1 * s + 0.02 * (s % 2)}});
  }
  CompareRequest request;
  request.experiment = "quickstart";
  request.metrics = {"test/a", "test/b"};
  request.reference = "random";
  const Comparison c = compare_study(store, request);
  std::vector<double> raw, adjusted;
  for (const auto& table : c.metrics)
    for (const auto& r : table.phases.at(0).rows)
      if (r.tested) raw.push_back(r.test.p), adjusted.push_back(r.p_adjusted);
  ASSERT_EQ(raw.size(), 4u);
  EXPECT_EQ(c.metrics[0].phases[0].family, 4u);
  EXPECT_EQ(adjusted, stats::adjust(raw, stats::Adjustment::holm));
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_GE(adjusted[i], raw[i]);
  request.adjustment = stats::Adjustment::none;
  request.metrics = {"test/a", "test/b"};
  const Comparison plain = compare_study(store, request);
  EXPECT_EQ(row(plain.metrics[1].phases[0], "x").p_adjusted, row(plain.metrics[1].phases[0], "x").test.p);
}

TEST_F(CompareStudyTest, TargetsCollapsesAndAConfirmationUnderAnotherConfig) {
  ResultsStore store(db_path());
  for (int64_t s = 0; s < 5; ++s) add(store, "learned", s, {{"cluster_f1", kLearned[s]}}, "", "hash-a");
  // Confirmed under another config; seed 1001 peaked at 0.95 and ended at 0.60.
  add(store, "learned", 1000, {{"cluster_f1", 0.93}}, "confirm", "hash-b", 0.94);
  add(store, "learned", 1001, {{"cluster_f1", 0.60}}, "confirm", "hash-b", 0.95);
  add(store, "learned", 1002, {{"cluster_f1", 0.92}}, "confirm", "hash-b", 0.93);
  CompareRequest request;
  request.experiment = "quickstart";
  request.targets = {stats::parse_target("test/cluster_f1>=0.9")};
  request.collapse = 0.2;
  const Comparison c = compare_study(store, request);
  ASSERT_EQ(c.metrics.size(), 1u);  // the target brings its metric
  const CompareRow& explore = c.metrics[0].phases.at(0).rows.at(0);
  EXPECT_TRUE(explore.has_target);
  EXPECT_NEAR(explore.target.bound, 0.8746520859901653, 1e-9);  // scipy, statistics_test.cpp
  EXPECT_FALSE(explore.target.met);
  EXPECT_EQ(explore.collapsed, 0);
  const CompareRow& confirm = c.metrics[0].phases.at(1).rows.at(0);
  EXPECT_EQ(confirm.collapsed, 1);
  EXPECT_FALSE(confirm.tested);  // the reference is this variant itself
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("confirmed under config hash hash-b but explored under hash-a"), std::string::npos)
      << c.warnings[0];
}

// --seeds and --revision: a database that holds both phases, or the runs of two builds, gives
// back the table of one of them.
TEST_F(CompareStudyTest, SeedsAndRevisionSelectTheRunsOfOneTable) {
  ResultsStore store(db_path());
  for (int64_t s = 0; s < 5; ++s) {
    add(store, "random", s, {{"cluster_f1", kRandom[s]}});
    add(store, "learned", s, {{"cluster_f1", kLearned[s]}});
  }
  for (int64_t s = 1000; s < 1003; ++s) {
    RunInfo info = make_run("learned", s);
    info.git_revision = "def456";
    const int64_t id = store.begin_run(info);
    store.log_metrics(id, 2, 1, "test", {{"cluster_f1", 0.5}});
    store.finish_run(id, RunStatus::finished);
  }
  CompareRequest request;
  request.experiment = "quickstart";
  request.metrics = {"test/cluster_f1"};
  request.reference = "random";
  request.filter.first_seed = 1, request.filter.last_seed = 3;
  Comparison c = compare_study(store, request);
  const CompareRow& learned = row(c.metrics.at(0).phases.at(0), "learned");
  ASSERT_EQ(learned.values.size(), 3u);
  EXPECT_NEAR(learned.mean, (kLearned[1] + kLearned[2] + kLearned[3]) / 3, 1e-12);
  request.filter = {};
  request.filter.revision = "def";  // a prefix, as git prints it
  request.reference = "learned";
  c = compare_study(store, request);
  EXPECT_EQ(row(c.metrics.at(0).phases.at(0), "learned").values, (std::vector<double>{0.5, 0.5, 0.5}));
  request.filter.revision = "fff";
  EXPECT_NE(error_of([&] { compare_study(store, request); }).find("among the runs the filters select"),
            std::string::npos);
}

TEST_F(CompareStudyTest, UnknownReferenceAndEmptyStudiesAreErrors) {
  ResultsStore store(db_path());
  add(store, "learned", 0, {{"mse", 0.1}});
  CompareRequest request;
  request.experiment = "quickstart";
  request.metrics = {"test/mse"};
  request.reference = "nope";
  EXPECT_NE(error_of([&] { compare_study(store, request); }).find("no finished variant 'nope'"), std::string::npos);
  request.experiment = "other";
  EXPECT_NE(error_of([&] { compare_study(store, request); }).find("no finished run of experiment 'other'"),
            std::string::npos);
  EXPECT_EQ(seed_list({2, 0, 1}), "0-2");
  EXPECT_EQ(seed_list({1000, 1003}), "1000, 1003");
}

// --margin: not worse than the reference by more than 1 % of its mean, decided by the paired
// one-sided bound and a p adjusted over the variants (the figures: scripts/research's pure-Python
// Student t on the same values).
TEST_F(CompareStudyTest, AMarginIsMetWhereTheBoundOfTheDifferenceClearsIt) {
  ResultsStore store(db_path());
  const std::vector<double> nearest = {0.950, 0.940, 0.962, 0.931, 0.955};
  const std::vector<double> residual = {0.949, 0.942, 0.960, 0.933, 0.951};
  const std::vector<double> tome = {0.900, 0.910, 0.905, 0.880, 0.915};
  for (int64_t s = 0; s < 5; ++s) {
    add(store, "nearest", 1000 + s, {{"cluster_f1", nearest[s]}, {"mse", 0.010 + 0.001 * s}}, "confirm");
    add(store, "residual", 1000 + s, {{"cluster_f1", residual[s]}, {"mse", 0.0105 + 0.001 * s + 0.0001 * (s % 2)}},
        "confirm");
    add(store, "tome", 1000 + s, {{"cluster_f1", tome[s]}, {"mse", 0.011 + 0.001 * s}}, "confirm");
  }
  CompareRequest request;
  request.experiment = "quickstart";
  request.reference = "nearest";
  request.margins = {stats::parse_margin("cluster_f1>=-1%"), stats::parse_margin("mse<=0.0008")};
  for (auto& m : request.margins) m.metric = qualified_metric(m.metric, "test");
  const Comparison c = compare_study(store, request);
  ASSERT_EQ(c.metrics.size(), 2u) << "a margin's metric is compared";
  const PhaseTable& f1 = c.metrics[0].phases.at(0);
  EXPECT_EQ(f1.margins, 4u) << "two variants x two margins";
  const CompareRow& r = row(f1, "residual");
  ASSERT_TRUE(r.has_margin);
  EXPECT_EQ(r.test.kind, stats::TestKind::paired);
  EXPECT_NEAR(r.margin.threshold, -0.009476, 1e-12) << "1 % of nearest's mean";
  EXPECT_NEAR(r.margin.bound, -0.003086139211650251, 1e-9);
  EXPECT_NEAR(r.margin.p, 0.0007997097196745795, 1e-9);
  EXPECT_TRUE(r.margin.met);
  EXPECT_LT(r.margin_p_adjusted, 0.05);
  const CompareRow& t = row(f1, "tome");
  EXPECT_NEAR(t.margin.bound, -0.05574812812904983, 1e-9);
  EXPECT_NEAR(t.margin.p, 0.9991913089003606, 1e-9);
  EXPECT_FALSE(t.margin.met);
  EXPECT_GE(t.margin_p_adjusted, 0.05);
  EXPECT_FALSE(row(f1, "nearest").has_margin) << "the reference has no difference";
  // Lower is better: residual's MSE is 0.0005-0.0006 above nearest's, within 0.0008; tome's 0.001 is not.
  const PhaseTable& mse = c.metrics[1].phases.at(0);
  EXPECT_TRUE(row(mse, "residual").margin.met) << row(mse, "residual").margin.bound;
  EXPECT_FALSE(row(mse, "tome").margin.met);
  EXPECT_DOUBLE_EQ(row(mse, "tome").margin.threshold, 0.0008) << "in the metric's units";
  EXPECT_GT(row(mse, "residual").margin_p_adjusted, row(mse, "residual").margin.p) << "adjusted over four";
}

TEST(CompareMargin, MarginsThatCannotBeReadAreRefused) {
  for (const char* bad : {"cluster_f1=1%", ">=-1%", "cluster_f1>=-1%%", "cluster_f1>=", "mse<=x%"})
    EXPECT_THROW(stats::parse_margin(bad), Error) << bad;
  const stats::Margin m = stats::parse_margin("test/cluster_f1>=-1.5%");
  EXPECT_EQ(m.metric, "test/cluster_f1");
  EXPECT_TRUE(m.at_least);
  EXPECT_TRUE(m.percent);
  EXPECT_DOUBLE_EQ(m.value, -1.5);
  EXPECT_FALSE(stats::parse_margin("mse<0.002").percent);
}

}  // namespace
}  // namespace htm
