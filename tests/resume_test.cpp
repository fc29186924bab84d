// Resume: a run stopped by a signal or killed mid-epoch continues from its checkpoint to the
// same parameters, bit for bit, as a run that was never stopped (one thread, same seed).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <torch/torch.h>

#include "config/device.h"
#include "config/experiment_config.h"
#include "kernels/kernels.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/trainer.h"

namespace htm {
namespace {

// Fashion-MNIST, 2 epochs of 4 steps, stochastic depth, dropout and an ema baseline: every
// random stream and every piece of optimiser state matters. A checkpoint every 3 steps.
ResolvedConfig tiny(const std::string& dir, const Registry& registry, const std::string& runtime = "") {
  std::ofstream(dir + "/tiny.toml") << "[experiment]\nname = \"resume\"\n"
                                    << "[adapter]\nplugin = \"image\"\npatch = 7\nfourier_bands = 4\n"
                                    << "[model]\ndim = 16\nheads = 2\nlayers = 4\nmlp_ratio = 2\ndropout = 0.1\n"
                                    << "[train]\nepochs = 2\nbatch_size = 16\ntrain_samples = 64\neval_samples = 16\n"
                                    << "log_every = 1\nrho0 = 0.5\nrho_step = 0.25\nimages = 2\neval_every = 3\n"
                                    << "[runtime]\nthreads = 1\ncheckpoint_every = 3\n"
                                    << runtime;
  return ExperimentFile::load(dir + "/tiny.toml", {}).resolve("default", registry);
}

struct Stopped {};  // what a test throws out of after_step: a crash at that point

using Series = std::map<std::string, double>;  // "split/name@step" → value

Series metrics_of(ResultsStore& store, int64_t run) {
  Series out;
  auto rows =
      store.query("SELECT split, name, step, value FROM metrics WHERE run_id = ? AND name != 'images_per_s'", {run});
  for (const auto& r : rows.rows) out[r[0] + "/" + r[1] + "@" + r[2]] = r[3].empty() ? NAN : std::stod(r[3]);
  return out;
}

std::vector<torch::Tensor> parameters_of(const Experiment& ex) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ex.model->parameters()) out.push_back(p.detach().clone());
  return out;
}

// A scratch folder, the tiny config, one thread and a results store with a run description.
class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    HTM_SKIP_WITHOUT_FASHION_MNIST();
    set_threads(1);
  }
  const std::string dir = htm::testing::fresh_dir("resume");
  Registry registry{{HTM_PLUGIN_DIR}};
  const ResolvedConfig config = tiny(dir, registry);
  ResultsStore store{dir + "/htm.sqlite"};
  RunInfo info = [] {
    RunInfo run;
    run.experiment = "resume";
    return run;
  }();
};

// Whether `have` is `want`: bit for bit where `tolerance` is 0, else within it relatively; the
// largest relative difference seen is kept in `worst`.
bool alike(double have, double want, double tolerance, double& worst) {
  const double gap = std::abs(have - want) / std::max(std::abs(want), 1e-30);
  worst = std::max(worst, have == want ? 0.0 : gap);
  return tolerance == 0 ? have == want : gap <= tolerance;
}

// A run stopped by a signal and resumed, then killed and resumed again, ends bit for bit where
// the same run uninterrupted ends: parameters, test MSE and every logged metric (within
// `tolerance` where it is not 0, saying the largest difference).
void expect_resumed_runs_end_alike(const ResolvedConfig& config, const Registry& registry, ResultsStore& store,
                                   const RunInfo& info, const std::string& dir, double tolerance = 0) {
  // Uninterrupted.
  Experiment straight = assemble(config, registry, 3);
  const int64_t a = store.begin_run(info);
  TrainSummary expected = Trainer(straight, store, a, dir + "/a", 3, "a").run();
  EXPECT_EQ(expected.steps, 8);

  // Stopped by a signal after step 2 (it checkpoints there), resumed, killed after step 7 (its
  // last checkpoint is step 6, mid-epoch), resumed again.
  const int64_t b = store.begin_run(info);
  {
    Experiment ex = assemble(config, registry, 3);
    TrainerOptions stop;
    stop.after_step = [](int64_t step) {
      if (step == 2) request_interrupt();
    };
    EXPECT_THROW(Trainer(ex, store, b, dir + "/b", 3, "b", stop).run(), Interrupted);
    reset_interrupt();
  }
  {
    Experiment ex = assemble(config, registry, 3);
    TrainerOptions crash;
    crash.resume = true;
    crash.after_step = [](int64_t step) {
      if (step == 7) throw Stopped{};
    };
    Trainer trainer(ex, store, b, dir + "/b", 3, "b", crash);
    EXPECT_THROW(trainer.run(), Stopped);
    EXPECT_EQ(trainer.resumed_from(), 2);
  }
  Experiment resumed = assemble(config, registry, 3);
  TrainerOptions again;
  again.resume = true;
  Trainer trainer(resumed, store, b, dir + "/b", 3, "b", again);
  TrainSummary got = trainer.run();
  EXPECT_EQ(trainer.resumed_from(), 6);
  EXPECT_EQ(got.steps, 8);
  double worst = 0;
  EXPECT_TRUE(alike(got.test_mse, expected.test_mse, tolerance, worst)) << got.test_mse << " vs " << expected.test_mse;

  const auto want = parameters_of(straight), have = parameters_of(resumed);
  ASSERT_EQ(want.size(), have.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (torch::equal(want[i], have[i])) continue;
    const auto w = want[i].cpu().to(torch::kDouble), h = have[i].cpu().to(torch::kDouble);
    const double gap = ((h - w).abs() / w.abs().clamp_min(1e-3)).max().item<double>();  // near 0: absolute
    worst = std::max(worst, gap);
    EXPECT_TRUE(tolerance > 0 && gap <= tolerance) << "parameter " << i << ": most relative difference " << gap;
  }
  // Every metric (but the timing) logged once at each step, with the same value.
  const Series sa = metrics_of(store, a), sb = metrics_of(store, b);
  EXPECT_EQ(sa.size(), sb.size());
  for (const auto& [key, value] : sa) {
    auto found = sb.find(key);
    ASSERT_NE(found, sb.end()) << key;
    if (!std::isnan(value)) EXPECT_TRUE(alike(found->second, value, tolerance, worst)) << key;
  }
  std::printf("resumed against uninterrupted: most relative difference %.2e\n", worst);
  EXPECT_FALSE(std::filesystem::exists(dir + "/b/checkpoint.pt.tmp"));
}

TEST_F(Resume, AStoppedAndAKilledRunEndWhereAnUninterruptedOneEnds) {
  expect_resumed_runs_end_alike(config, registry, store, info, dir);
}

// The same with the gpu kernels (run here on the CPU): their draws are seeded from the run's
// checkpointed generators, so a resumed run draws what the uninterrupted one drew.
TEST_F(Resume, WithTheGpuKernelsAResumedRunEndsWhereAnUninterruptedOneEnds) {
  KernelsScope scope(Kernels::gpu);
  expect_resumed_runs_end_alike(config, registry, store, info, dir);
}

// On a GPU (skipped where this libtorch has none or sees none), with the step replayed from CUDA
// graphs: the same, to float rounding (CUDA's atomic adds in backward add in no fixed order, so
// two uninterrupted runs may differ as much); the test prints the largest difference.
TEST_F(Resume, OnAGpuWithGraphsAResumedRunEndsWhereAnUninterruptedOneEnds) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  const ResolvedConfig on_gpu = tiny(dir, registry, "device = \"cuda\"\ncuda_graph = \"on\"\n");
  expect_resumed_runs_end_alike(on_gpu, registry, store, info, dir, 1e-4);
}

TEST_F(Resume, WithoutACheckpointARunStartsOverAndLogsNothingTwice) {
  const int64_t run = store.begin_run(info);
  {
    Experiment ex = assemble(config, registry, 0);
    TrainerOptions crash;
    crash.after_step = [](int64_t step) {
      if (step == 2) throw Stopped{};  // before the first checkpoint (step 3)
    };
    EXPECT_THROW(Trainer(ex, store, run, dir + "/r", 0, "r", crash).run(), Stopped);
  }
  Experiment ex = assemble(config, registry, 0);
  TrainerOptions resume;
  resume.resume = true;
  Trainer trainer(ex, store, run, dir + "/r", 0, "r", resume);
  trainer.run();
  EXPECT_EQ(trainer.resumed_from(), 0);
  auto twice = store.query(
      "SELECT count(*) FROM (SELECT split, name, step FROM metrics WHERE run_id = ? "
      "GROUP BY split, name, step HAVING count(*) > 1)",
      {run});
  EXPECT_EQ(twice.rows[0][0], "0");
}

// A kill after the last checkpoint (the final step's) but before the run is recorded finished:
// the resume repeats what comes after the loop (the policy's spread, the final pictures) and
// logs it once.
TEST_F(Resume, AKillAfterTheLastCheckpointLogsTheEndOnce) {
  const int64_t run = store.begin_run(info);
  {
    Experiment ex = assemble(config, registry, 0);
    Trainer(ex, store, run, dir + "/e", 0, "e").run();
  }
  Experiment ex = assemble(config, registry, 0);
  TrainerOptions resume;
  resume.resume = true;
  Trainer trainer(ex, store, run, dir + "/e", 0, "e", resume);
  trainer.run();
  EXPECT_EQ(trainer.resumed_from(), 8);
  auto twice = store.query(
      "SELECT count(*) FROM (SELECT split, name, step FROM metrics WHERE run_id = ? "
      "GROUP BY split, name, step HAVING count(*) > 1)",
      {run});
  EXPECT_EQ(twice.rows[0][0], "0");
  EXPECT_EQ(
      store.query("SELECT count(*) FROM metrics WHERE run_id = ? AND name = 'policy_variation'", {run}).rows[0][0],
      "1");
  auto listed = store.query(
      "SELECT count(*) FROM (SELECT path FROM artifacts WHERE run_id = ? GROUP BY path HAVING count(*) > 1)", {run});
  EXPECT_EQ(listed.rows[0][0], "0");
}

}  // namespace
}  // namespace htm
