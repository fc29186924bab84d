// Data-parallel training (dist/): 2 ranks × 8 rows against 1 process × 16 rows, a rank that
// dies, the random draws a split batch keeps, shards of a study, and bad input.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "commands/runner.h"
#include "dist/communicator.h"
#include "htm/layers.h"
#include "htm/policy.h"
#include "kernels/row_shard_scope.h"
#include "store/results_store.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace htm {
namespace {

const std::string kStudy = std::string(HTM_SOURCE_DIR) + "/tests/distributed/tiny.toml";

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("htm-dist-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    htm::testing::remove_tree(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { htm::testing::remove_tree(dir); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

// Runs the htm binary through the shell; returns its exit code and output.
std::pair<int, std::string> htm(const std::string& arguments, const std::string& environment = "") {
  const std::string command = environment + " " + HTM_BINARY + " " + arguments + " 2>&1";
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  char buf[512];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = p != nullptr ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

std::string study_options(const Scratch& s, const std::string& db) {
  return kStudy + " --db " + s / db + " --set runtime.artifacts=\"" + s / "runs" + "\" --quiet";
}

// run id → {metric step → value} for one train metric, and the artifact folder, per variant.
struct Recorded {
  std::map<std::string, std::vector<double>> loss;
  std::map<std::string, double> test_mse;
  std::map<std::string, std::string> artifacts;
};
Recorded read(const std::string& db) {
  ResultsStore store(db, OpenMode::read_only);
  Recorded r;
  for (const auto& row : store.query("SELECT variant, artifact_dir FROM runs WHERE status = 'finished'").rows)
    r.artifacts[row[0]] = row[1];
  for (const auto& row : store
                             .query("SELECT r.variant, m.value FROM metrics m JOIN runs r ON r.id = m.run_id "
                                    "WHERE m.split = 'train' AND m.name = 'loss' ORDER BY r.variant, m.step")
                             .rows)
    r.loss[row[0]].push_back(std::stod(row[1]));
  for (const auto& row : store
                             .query("SELECT r.variant, m.value FROM latest_metrics m JOIN runs r ON r.id = m.run_id "
                                    "WHERE m.split = 'test' AND m.name = 'mse'")
                             .rows)
    r.test_mse[row[0]] = std::stod(row[1]);
  return r;
}

std::map<std::string, torch::Tensor> weights(const std::string& checkpoint) {
  torch::serialize::InputArchive archive;
  archive.load_from(checkpoint);
  std::map<std::string, torch::Tensor> out;
  for (const auto& key : archive.keys()) {
    torch::Tensor t;
    if (archive.try_read(key, t)) out[key] = t;
  }
  return out;
}

// The process of rank `rank` started by the launcher `launcher` (0: not found).
pid_t rank_process(pid_t launcher, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream env(entry.path() / "environ", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    const std::string rank_var = std::string(1, '\0') + "RANK=" + std::to_string(rank) + '\0';
    if (text.find("HTM_WORKER_OF=" + std::to_string(launcher) + '\0') != std::string::npos &&
        text.find(rank_var) != std::string::npos)
      return std::stoi(entry.path().filename().string());
  }
  return 0;
}

// The tolerance the equivalence is held to: float32 sums taken in another order (a mean over 16
// rows against two means over 8 summed), through 8 AdamW steps.
constexpr double kTolerance = 1e-4;

TEST(DataParallel, TwoRanksOfHalfTheBatchMatchOneProcessOfTheWholeBatch) {
  Scratch s;
  auto [one_code, one_out] = htm("run " + study_options(s, "one.sqlite"));
  ASSERT_EQ(one_code, 0) << one_out;
  auto [two_code, two_out] = htm("run " + study_options(s, "two.sqlite") + " --nproc 2");
  ASSERT_EQ(two_code, 0) << two_out;
  const Recorded one = read(s / "one.sqlite"), two = read(s / "two.sqlite");
  ASSERT_EQ(one.artifacts.size(), 4u);
  ASSERT_EQ(two.artifacts.size(), 4u) << "rank 0 alone records: one row per run";
  for (const auto& [variant, losses] : one.loss) {
    SCOPED_TRACE(variant);
    const auto& other = two.loss.at(variant);
    ASSERT_EQ(losses.size(), 8u);
    ASSERT_EQ(other.size(), losses.size());
    for (size_t i = 0; i < losses.size(); ++i)
      EXPECT_NEAR(other[i], losses[i], kTolerance * std::max(1.0, std::abs(losses[i]))) << "step " << i + 1;
    EXPECT_NEAR(two.test_mse.at(variant), one.test_mse.at(variant), kTolerance);
    const auto a = weights(one.artifacts.at(variant) + "/checkpoint.pt");
    const auto b = weights(two.artifacts.at(variant) + "/checkpoint.pt");
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    double worst = 0, scale = 0;
    for (const auto& [name, value] : a) {
      ASSERT_EQ(b.count(name), 1u) << name;
      worst = std::max(worst, (value - b.at(name)).abs().max().item<double>());
      scale = std::max(scale, value.abs().max().item<double>());
    }
    EXPECT_LT(worst, kTolerance * std::max(1.0, scale)) << "largest parameter difference";
    std::printf(
        "[ %s ] final parameters: largest difference %.3g (largest parameter %.3g), loss steps equal within %.0e\n",
        variant.c_str(), worst, scale, kTolerance);
  }
  EXPECT_FALSE(fs::exists(s / "two.sqlite-journal"));
}

// runtime.recompute = "blocks" on two ranks: each recomputed block draws its rank's rows of the
// whole batch's masks again, and the gradients are summed once backward has ended (a nested
// backward accumulates a parameter once per use of its block).
TEST(DataParallel, TwoRanksRecomputingTheirBlocksMatchOneProcessThatKeepsThem) {
  Scratch s;
  const std::string variants = " --variant mlp --variant rloo";
  auto [one_code, one_out] = htm("run " + study_options(s, "one.sqlite") + variants);
  ASSERT_EQ(one_code, 0) << one_out;
  auto [two_code, two_out] =
      htm("run " + study_options(s, "two.sqlite") + variants + " --set 'runtime.recompute=\"blocks\"' --nproc 2");
  ASSERT_EQ(two_code, 0) << two_out;
  const Recorded one = read(s / "one.sqlite"), two = read(s / "two.sqlite");
  ASSERT_EQ(one.loss.size(), 2u);
  for (const auto& [variant, losses] : one.loss) {
    SCOPED_TRACE(variant);
    const auto& other = two.loss.at(variant);
    ASSERT_EQ(other.size(), losses.size());
    for (size_t i = 0; i < losses.size(); ++i)
      EXPECT_NEAR(other[i], losses[i], kTolerance * std::max(1.0, std::abs(losses[i]))) << "step " << i + 1;
    EXPECT_NEAR(two.test_mse.at(variant), one.test_mse.at(variant), kTolerance);
  }
}

TEST(DataParallel, ARankThatDiesFailsTheRunWithinTheTimeout) {
  Scratch s;
  // A longer run, so rank 1 can be killed while training.
  const std::string args = "run " + study_options(s, "db.sqlite") + " --variant mlp --set train.epochs=200 --nproc 2";
  const auto t0 = std::chrono::steady_clock::now();
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    setenv("HTM_DIST_TIMEOUT", "30", 1);
    execl("/bin/sh", "sh", "-c", (std::string("exec ") + HTM_BINARY + " " + args + " > " + s / "log" + " 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until a run is recording, then kill -9 the rank-1 process.
  pid_t victim = 0;
  for (int i = 0; i < 600 && victim == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::exists(s / "db.sqlite")) victim = rank_process(launcher, 1);
  }
  ASSERT_NE(victim, 0) << "rank 1 never appeared";
  std::this_thread::sleep_for(std::chrono::seconds(3));  // into training
  kill(victim, SIGKILL);
  int status = 0;
  waitpid(launcher, &status, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream log(s / "log");
  const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_LT(seconds, 90) << out;
  ResultsStore store(s / "db.sqlite", OpenMode::read_only);
  const auto rows = store.query("SELECT status, error FROM runs").rows;
  ASSERT_EQ(rows.size(), 1u) << out;
  EXPECT_EQ(rows[0][0], "failed") << out;
  EXPECT_NE(rows[0][1].find("rank 0 of 2"), std::string::npos) << rows[0][1];
  EXPECT_NE(rows[0][1].find("other ranks failed"), std::string::npos) << rows[0][1];
  std::printf("[ killed rank 1 ] run recorded failed %.1f s after the start: %s\n", seconds, rows[0][1].c_str());
}

// SIGINT to one rank of `htm run --nproc 2` (under srun each rank gets its own, at its own time;
// a Ctrl-C to the launcher reaches all): the ranks agree on a step, rank 0 checkpoints and
// records the run interrupted; the same command resumes it on two ranks, and it ends where one
// uninterrupted process ends.
TEST(DataParallel, AnInterruptedRunResumesOnTwoRanksAndEndsWhereOneProcessEnds) {
  Scratch s;
  // Long evaluations every other step: the signal often lands in one, where a rank must not act
  // on it alone.
  const std::string common =
      " --variant mlp --set train.epochs=30 --set runtime.checkpoint_every=5 --set train.eval_every=2 --set "
      "dataset.test_size=512 --set train.eval_samples=512";
  ASSERT_EQ(htm("run " + study_options(s, "one.sqlite") + common).first, 0);
  const std::string two = "run " + study_options(s, "two.sqlite") + common + " --nproc 2";
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    execl("/bin/sh", "sh", "-c", (std::string("exec ") + HTM_BINARY + " " + two + " > " + s / "log" + " 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int64_t logged = 0;  // wait until it has trained a while (but not to the end: 240 steps)
  for (int i = 0; i < 600 && logged < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(s / "two.sqlite")) continue;
    try {
      ResultsStore store(s / "two.sqlite", OpenMode::read_only);
      logged = std::stoll(store.query("SELECT count(*) FROM metrics WHERE name = 'loss'").rows.at(0).at(0));
    } catch (const std::exception&) {
    }
  }
  ASSERT_GE(logged, 40);
  const pid_t rank1 = rank_process(launcher, 1);
  ASSERT_NE(rank1, 0);
  kill(rank1, SIGINT);
  int status = 0;
  waitpid(launcher, &status, 0);
  std::ifstream log(s / "log");
  const std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  {
    ResultsStore store(s / "two.sqlite", OpenMode::read_only);
    EXPECT_EQ(store.query("SELECT status FROM runs").rows.at(0).at(0), "interrupted") << out;
  }
  auto [code, again] = htm(two);
  ASSERT_EQ(code, 0) << again;
  ResultsStore store(s / "two.sqlite", OpenMode::read_only);
  EXPECT_EQ(store.query("SELECT status, resumes FROM runs").rows.at(0), (std::vector<std::string>{"finished", "1"}));
  const Recorded one = read(s / "one.sqlite"), resumed = read(s / "two.sqlite");
  ASSERT_EQ(resumed.loss.at("mlp").size(), one.loss.at("mlp").size()) << "every step logged once";
  for (size_t i = 0; i < one.loss.at("mlp").size(); ++i)
    EXPECT_NEAR(resumed.loss.at("mlp")[i], one.loss.at("mlp")[i], kTolerance) << "step " << i + 1;
  const auto a = weights(one.artifacts.at("mlp") + "/checkpoint.pt");
  const auto b = weights(resumed.artifacts.at("mlp") + "/checkpoint.pt");
  double worst = 0;
  for (const auto& [name, value] : a) worst = std::max(worst, (value - b.at(name)).abs().max().item<double>());
  EXPECT_LT(worst, kTolerance);
  std::printf(
      "[ interrupted at %lld logged steps, resumed on 2 ranks ] largest parameter difference from one process: %.3g\n",
      static_cast<long long>(logged), worst);
}

TEST(DataParallel, BadInputIsRefusedWithOneClearLine) {
  Scratch s;
  auto expect = [&](const std::string& args, const std::string& env, const std::string& message) {
    auto [code, out] = htm(args, env);
    EXPECT_NE(code, 0) << args;
    EXPECT_NE(out.find(message), std::string::npos) << args << "\n" << out;
  };
  const std::string run = "run " + study_options(s, "db.sqlite");
  expect(run + " --nproc 0", "", "--nproc 0: must be at least 1");
  expect(run + " --shard 2/2", "", "--shard 2/2: K must be in 0..1");
  expect(run + " --shard two", "", "--shard two: expected K/N");
  expect(run + " --nproc 2 --jobs 2", "", "--nproc and --jobs cannot be combined");
  expect(run, "WORLD_SIZE=2 RANK=1 MASTER_ADDR=no-such-host.invalid MASTER_PORT=29999 HTM_DIST_TIMEOUT=2",
         "cannot reach the rendezvous at no-such-host.invalid:29999");
  expect(run, "WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 HTM_DIST_TIMEOUT=2",
         "rank 1 of 2: cannot reach the rendezvous at 127.0.0.1:1 (MASTER_ADDR:MASTER_PORT) within 2 s");
  expect(run, "WORLD_SIZE=2 RANK=2 MASTER_ADDR=127.0.0.1", "RANK='2' is not an integer in 0..1");
  expect(run, "WORLD_SIZE=2 RANK=0", "MASTER_ADDR is not");
  EXPECT_FALSE(fs::exists(s / "db.sqlite")) << "nothing was recorded";
}

// Ranks an outside launcher started (torchrun's variables, no --nproc): each `htm run` trains its
// rank in a supervised child, so a segfault in rank 1's policy plugin is recorded in the run rank
// 0 claimed, naming the signal, the plugin, the step and the rank, ahead of rank 0's own failure.
TEST(DataParallel, UnderAnOutsideLauncherARankCrashIsRecordedWithItsPlugin) {
  Scratch s;
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(30000 + getpid() % 500) +
                          " HTM_DIST_TIMEOUT=30 HTM_PLUGIN_PATH=" + HTM_TEST_PLUGIN_DIR;
  const std::string args = "run " + std::string(HTM_SOURCE_DIR) + "/tests/faults/crash.toml --variant crashy_rank1 " +
                           "--seed 0 --db " + s / "db.sqlite" + " --set runtime.artifacts=\"" + s / "runs" +
                           "\" --quiet";
  std::pair<int, std::string> rank1;
  std::thread second([&] { rank1 = htm(args, env + " RANK=1"); });
  const auto [code, out] = htm(args, env + " RANK=0");
  second.join();
  EXPECT_EQ(code, 1) << out;
  EXPECT_EQ(rank1.first, 1) << rank1.second;
  EXPECT_NE(rank1.second.find("(rank 1 of 2)"), std::string::npos) << rank1.second;
  ResultsStore store(s / "db.sqlite", OpenMode::read_only);
  const auto rows = store.query("SELECT status, error FROM runs").rows;
  ASSERT_EQ(rows.size(), 1u) << out << rank1.second;
  EXPECT_EQ(rows[0][0], "failed");
  const std::string& error = rows[0][1];
  EXPECT_EQ(error.rfind("crashed: SIGSEGV (Segmentation fault) in policy plugin 'faulty'", 0), 0u) << error;
  EXPECT_NE(error.find(" at step "), std::string::npos) << error;
  EXPECT_NE(error.find("(rank 1 of 2); then "), std::string::npos) << error;
  std::printf("[ outside launcher ] %s\n", error.c_str());
}

TEST(DataParallel, RanksGivenDifferentExperimentsAreRefused) {
  Scratch s;
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(29600 + getpid() % 300) +
                          " HTM_DIST_TIMEOUT=20";
  const std::string base = "run " + study_options(s, "db.sqlite") + " --variant mlp";
  std::string rank1_out;
  std::thread rank1([&] { rank1_out = htm(base + " --set train.lr=0.1", env + " RANK=1").second; });
  auto [code, out] = htm(base, env + " RANK=0");
  rank1.join();
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("rank 0 of 2 runs another experiment than rank 1"), std::string::npos) << out;
  EXPECT_NE(rank1_out.find("rank 1 of 2 runs another experiment than rank 0"), std::string::npos) << rank1_out;
}

TEST(DataParallel, RowsOfRankCoverTheBatchOnceInOrder) {
  for (int64_t count : {2, 7, 16, 17}) {
    for (int world : {1, 2, 3}) {
      if (count < world) continue;
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const auto [offset, rows] = rows_of_rank(count, r, world);
        EXPECT_EQ(offset, next);
        EXPECT_GE(rows, count / world);
        EXPECT_LE(rows, count / world + 1);
        next += rows;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// Each rank's samplers and masks must draw what one process drawing for the whole batch draws
// for that rank's rows.
TEST(DataParallel, ASplitBatchDrawsTheWholeBatchsRandomNumbersForItsRows) {
  const int64_t B = 6, T = 8;
  auto logits = torch::randn({B, T, T});
  auto scores = torch::randn({B, T});
  auto x = torch::ones({B, T, 5});
  auto whole_gen = at::make_generator<at::CPUGeneratorImpl>(11);
  auto [src, dst] = sample_disjoint_pairs(logits, 3, whole_gen);
  auto top = sample_without_replacement(scores, 4, whole_gen);
  auto noise = normal_like_rows(x, whole_gen);
  torch::manual_seed(5);
  auto mask = fast_dropout(x, 0.5, true);
  for (int rank = 0; rank < 2; ++rank) {
    const auto [offset, rows] = rows_of_rank(B, rank, 2);
    RowShardScope scope(RowShard{offset, rows, B});
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    auto [s, d] = sample_disjoint_pairs(logits.narrow(0, offset, rows), 3, gen);
    EXPECT_TRUE(torch::equal(s, src.narrow(0, offset, rows)));
    EXPECT_TRUE(torch::equal(d, dst.narrow(0, offset, rows)));
    EXPECT_TRUE(
        torch::equal(sample_without_replacement(scores.narrow(0, offset, rows), 4, gen), top.narrow(0, offset, rows)));
    EXPECT_TRUE(torch::equal(normal_like_rows(x.narrow(0, offset, rows), gen), noise.narrow(0, offset, rows)));
    torch::manual_seed(5);
    EXPECT_TRUE(torch::equal(fast_dropout(x.narrow(0, offset, rows), 0.5, true), mask.narrow(0, offset, rows)));
  }
  // Without a split, nothing changes: the same numbers as torch's own draw.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto ours = normal_like_rows(x, gen);
  auto gen2 = at::make_generator<at::CPUGeneratorImpl>(3);
  EXPECT_TRUE(torch::equal(ours, torch::randn(x.sizes(), gen2)));
}

TEST(Shards, TwoShardsMergedHoldTheWholeStudysRuns) {
  Scratch s;
  const std::string study = kStudy + " --set runtime.artifacts=\"" + s / "runs" + "\" --quiet --set train.epochs=1";
  ASSERT_EQ(htm("run " + study + " --db " + s / "whole.sqlite").first, 0);
  ASSERT_EQ(htm("run " + study + " --shard 0/2 --db " + s / "s0.sqlite").first, 0);
  ASSERT_EQ(htm("run " + study + " --shard 1/2 --db " + s / "s1.sqlite").first, 0);
  auto [code, out] = htm("merge " + s / "s0.sqlite" + " " + s / "s1.sqlite" + " --db " + s / "merged.sqlite");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("s0.sqlite: 2 new runs merged"), std::string::npos) << out;
  EXPECT_NE(out.find("s1.sqlite: 2 new runs merged"), std::string::npos) << out;
  auto again = htm("merge " + s / "s0.sqlite" + " " + s / "s1.sqlite" + " --db " + s / "merged.sqlite");
  EXPECT_NE(again.second.find("s0.sqlite: 0 new runs merged"), std::string::npos) << again.second;
  // Same runs, configs and metrics (timestamps and ids aside).
  const std::string runs = "SELECT variant, seed, status, config_hash FROM runs ORDER BY variant, seed";
  const std::string metrics =
      "SELECT r.variant, r.seed, m.step, m.split, m.name, printf('%.17g', m.value) FROM metrics m JOIN runs r ON r.id "
      "= m.run_id "
      "WHERE m.name NOT IN ('images_per_s') ORDER BY r.variant, r.seed, m.step, m.split, m.name";
  ResultsStore whole(s / "whole.sqlite", OpenMode::read_only), merged(s / "merged.sqlite", OpenMode::read_only);
  EXPECT_EQ(whole.query(runs).rows, merged.query(runs).rows);
  EXPECT_EQ(whole.query(runs).rows.size(), 4u);
  EXPECT_EQ(whole.query(metrics).rows, merged.query(metrics).rows);
}

}  // namespace
}  // namespace htm
