// A tiny experiment through the whole stack: config → plugins → training → results database.
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "commands/runner.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"

namespace htm {
namespace {

// Fashion-MNIST, 16 tokens of 7x7 patches, 4 layers down to one token, a few steps.
std::string tiny_experiment(const std::string& dir, const std::string& extra = "") {
  const std::string path = dir + "/tiny.toml";
  std::ofstream(path) << "[experiment]\nname = \"tiny\"\nseeds = [0]\n"
                      << "[adapter]\nplugin = \"image\"\npatch = 7\nfourier_bands = 4\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 4\nmlp_ratio = 2\n"
                      << "[train]\nepochs = 2\nbatch_size = 16\ntrain_samples = 64\neval_samples = 32\n"
                      << "log_every = 1\nrho0 = 0.5\nrho_step = 0.5\nimages = 4\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\n"
                      << "artifacts = \"" << dir << "/runs\"\n"
                      << extra;
  return path;
}

std::string cell(ResultsStore& store, const std::string& sql) {
  auto r = store.query(sql);
  return r.rows.empty() ? "" : r.rows[0][0];
}

TEST(EndToEnd, TrainsRecordsAndSkipsWhatIsDone) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("e2e");
  Registry registry({HTM_PLUGIN_DIR});
  RunRequest request;
  request.file = tiny_experiment(dir);
  ASSERT_EQ(run_experiment(request, registry), 0);

  ResultsStore store(dir + "/htm.sqlite");
  EXPECT_EQ(cell(store, "SELECT status FROM runs"), "finished");
  EXPECT_EQ(cell(store, "SELECT count(*) FROM metrics WHERE split='train' AND name='loss'"), "8");
  const double mse = std::stod(cell(store, "SELECT value FROM latest_metrics WHERE split='test' AND name='mse'"));
  const double baseline = std::stod(cell(store, "SELECT value FROM metrics WHERE name='baseline_mse'"));
  EXPECT_GT(mse, 0);
  EXPECT_GT(baseline, 0);
  EXPECT_EQ(cell(store, "SELECT count(*) FROM metrics WHERE split='test' AND name='mse'"), "2");  // per epoch
  for (const char* name : {"rho", "depth", "images_per_s", "loss/mse", "lr", "grad_norm/adapter", "grad_norm/merge",
                           "grad_norm/policy", "baseline/linear_accuracy"})
    EXPECT_EQ(cell(store, std::string("SELECT count(*) > 0 FROM metrics WHERE name='") + name + "'"), "1") << name;
  // The PCA reference has the bottleneck's size: one token of width 16.
  EXPECT_EQ(cell(store, "SELECT value FROM metrics WHERE name='baseline/pca_components'"), "16");
  const double pca = std::stod(cell(store, "SELECT value FROM metrics WHERE name='baseline/pca_mse'"));
  EXPECT_GT(pca, 0);
  EXPECT_LT(pca, baseline);  // 16 components explain some of the variance the mean leaves
  EXPECT_EQ(cell(store, "SELECT count(*) FROM metrics WHERE name='grad_norm/loss_mse'"), "0");  // no parameters
  // Resolved config, versions and artifacts are recorded.
  EXPECT_THAT(cell(store, "SELECT config_toml FROM runs"), ::testing::HasSubstr("patch = 7"));
  EXPECT_EQ(cell(store, "SELECT version FROM run_plugins WHERE name='learned'"), "1.1.0");
  EXPECT_EQ(cell(store, "SELECT value FROM params WHERE key='model.dim'"), "16");
  for (const char* kind : {"checkpoint", "reconstructions"}) {
    const std::string path = cell(store, std::string("SELECT path FROM artifacts WHERE kind='") + kind + "'");
    EXPECT_TRUE(std::filesystem::exists(path)) << kind << " at '" << path << "'";
  }

  // A finished run with the same config is not run again.
  ASSERT_EQ(run_experiment(request, registry), 0);
  EXPECT_EQ(cell(store, "SELECT count(*) FROM runs"), "1");
}

TEST(EndToEnd, SameSeedSameResult) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("seed");
  Registry registry({HTM_PLUGIN_DIR});
  RunRequest request;
  request.file = tiny_experiment(dir);
  request.rerun = true;
  request.overrides = {"train.epochs=1"};
  ASSERT_EQ(run_experiment(request, registry), 0);
  ASSERT_EQ(run_experiment(request, registry), 0);
  request.seeds = {1};
  ASSERT_EQ(run_experiment(request, registry), 0);
  ResultsStore store(dir + "/htm.sqlite");
  auto r = store.query(
      "SELECT r.seed, m.value FROM metrics m JOIN runs r ON r.id = m.run_id "
      "WHERE m.split='test' AND m.name='mse' ORDER BY r.id");
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0][1], r.rows[1][1]) << "seed 0 twice";
  EXPECT_NE(r.rows[0][1], r.rows[2][1]) << "seed 1 should differ";
}

// runtime.pictures_every = 1: the pictures at the first epoch's end too (files named by the step),
// and the run trains exactly as one without them (the same losses and test MSE, bit for bit).
TEST(EndToEnd, PicturesAtEachEpochKeepTheirStepAndChangeNoResult) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("pictures");
  Registry registry({HTM_PLUGIN_DIR});
  RunRequest request;
  request.file = tiny_experiment(dir);
  request.rerun = true;
  ASSERT_EQ(run_experiment(request, registry), 0);
  request.overrides = {"runtime.pictures_every=1"};
  ASSERT_EQ(run_experiment(request, registry), 0);
  ResultsStore store(dir + "/htm.sqlite");
  const auto series = [&](int run) {
    return store
        .query("SELECT split, name, step, printf('%.17g', value) FROM metrics WHERE run_id = " + std::to_string(run) +
               " AND name != 'images_per_s' ORDER BY split, name, step")
        .rows;
  };
  EXPECT_EQ(series(1), series(2)) << "pictures drew from a stream training uses";
  const auto steps = [&](int run) {
    return cell(store,
                "SELECT group_concat(kind || '@' || step, ' ') FROM (SELECT kind, step FROM artifacts "
                "WHERE run_id = " +
                    std::to_string(run) + " AND path LIKE '%.png' ORDER BY step, kind)");
  };
  EXPECT_EQ(steps(1), "policy_heatmap@8 reconstructions@8");
  EXPECT_EQ(steps(2), "policy_heatmap@4 reconstructions@4 policy_heatmap@8 reconstructions@8");
  EXPECT_EQ(cell(store, "SELECT count(DISTINCT path) FROM artifacts WHERE run_id = 2 AND path LIKE '%.png'"), "4");
}

TEST(EndToEnd, APluginThatThrowsMidRunMarksTheRunFailedAndKeepsItsMetrics) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("throw");
  Registry registry({HTM_PLUGIN_DIR, HTM_TEST_PLUGIN_DIR});
  RunRequest request;
  // Calls 1 and 2 are the memory estimate's two measured steps (4 and 8 samples), 3 to 5 the
  // run's first three steps.
  request.file = tiny_experiment(dir, "[loss.throwing]\nfail_after = 5\n");
  EXPECT_EQ(run_experiment(request, registry), 1);
  ResultsStore store(dir + "/htm.sqlite");
  EXPECT_EQ(cell(store, "SELECT status FROM runs"), "failed");
  EXPECT_THAT(cell(store, "SELECT error FROM runs"), ::testing::HasSubstr("deliberate failure at call 6"));
  EXPECT_EQ(cell(store, "SELECT count(*) FROM metrics WHERE split='train' AND name='loss'"), "3");
  EXPECT_EQ(cell(store, "PRAGMA integrity_check"), "ok");
}

// The trainer reads a step's loss once the next step is under way (TrainStep::read_loss_later):
// a run whose loss turns NaN still stops naming the first step whose loss was not finite, even
// when the step after it fails first, and keeps what it recorded before.
TEST(EndToEnd, ADivergedRunNamesItsFirstStepWhoseLossWasNotFinite) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("diverge");
  Registry registry({HTM_PLUGIN_DIR, HTM_TEST_PLUGIN_DIR});
  RunRequest request;
  // Calls 1 and 2 are the memory estimate's; 3 to 6 the run's steps 1 to 4, of which step 3 is
  // the first NaN (call 5) and step 4 throws (call 6). Logged every 4th step: steps 1-3 are read
  // later.
  request.file = tiny_experiment(dir, "[loss.throwing]\nfail_after = 5\nnan_after = 4\n");
  request.overrides = {"train.log_every=4"};
  EXPECT_EQ(run_experiment(request, registry), 1);
  ResultsStore store(dir + "/htm.sqlite");
  EXPECT_EQ(cell(store, "SELECT status FROM runs"), "failed");
  EXPECT_THAT(cell(store, "SELECT error FROM runs"), ::testing::HasSubstr("training diverged at step 3"));
  // Without the step that throws: step 3 is named at step 4's read.
  request.file = tiny_experiment(dir, "[loss.throwing]\nfail_after = 99\nnan_after = 4\n");
  request.rerun = true;
  EXPECT_EQ(run_experiment(request, registry), 1);
  EXPECT_THAT(cell(store, "SELECT error FROM runs ORDER BY id DESC"),
              ::testing::HasSubstr("training diverged at step 3"));
  EXPECT_EQ(cell(store, "PRAGMA integrity_check"), "ok");
}

TEST(EndToEnd, AnInterruptBeforeARunStartsLeavesItUnstarted) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("interrupt");
  Registry registry({HTM_PLUGIN_DIR});
  RunRequest request;
  request.file = tiny_experiment(dir);
  request_interrupt();
  const int code = run_experiment(request, registry);
  reset_interrupt();
  EXPECT_EQ(code, 130);
  ResultsStore store(dir + "/htm.sqlite");
  EXPECT_EQ(cell(store, "SELECT count(*) FROM runs"), "0");  // never started: nothing to resume
}

TEST(EndToEnd, APluginThatFailsInTheFirstForwardPassIsNamedAndRecorded) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("faulty");
  Registry registry({HTM_PLUGIN_DIR, HTM_TEST_PLUGIN_DIR});
  RunRequest request;
  for (const char* fault : {"throw", "shape"}) {
    request.file = tiny_experiment(dir, std::string("[policy]\nplugin = \"faulty\"\nfault = \"") + fault + "\"\n");
    EXPECT_EQ(run_experiment(request, registry), 1) << fault;
  }
  ResultsStore store(dir + "/htm.sqlite");
  auto rows = store.query("SELECT status, error FROM runs ORDER BY id");
  ASSERT_EQ(rows.rows.size(), 2u);
  const std::string plugin =
      "policy plugin 'faulty' 0.9.1 (" + std::string(HTM_TEST_PLUGIN_DIR) + "/htm_policy_faulty.so) failed: ";
  EXPECT_EQ(rows.rows[0][0], "failed");
  EXPECT_EQ(rows.rows[0][1], plugin + "boom from faulty scoring");
  EXPECT_EQ(rows.rows[1][1],
            plugin + "its merge decision's src is Long of shape [2, 1], expected int64 of shape [2, 8]");
  // Each library that ran is recorded with its path and SHA-256.
  EXPECT_EQ(cell(store, "SELECT count(*) FROM run_plugins WHERE length(sha256) = 64 AND path LIKE '%.so'"),
            cell(store, "SELECT count(*) FROM run_plugins"));
}

TEST(EndToEnd, BadInputFailsBeforeAnythingIsRecorded) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("bad");
  Registry registry({HTM_PLUGIN_DIR});
  RunRequest request;
  request.file = tiny_experiment(dir, "[dataset]\nplugin = \"cifar10\"\nroot = \"" + dir + "/none\"\n");
  EXPECT_THROW(run_experiment(request, registry), Error);
  request.file = tiny_experiment(dir, "[policy]\nplugin = \"learned\"\nheads = 3\n");  // 3 ∤ 16
  EXPECT_THROW(run_experiment(request, registry), Error);
  ResultsStore store(dir + "/htm.sqlite");
  EXPECT_EQ(cell(store, "SELECT count(*) FROM runs"), "0");
}

}  // namespace
}  // namespace htm
