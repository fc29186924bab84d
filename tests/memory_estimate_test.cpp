// The training memory estimate (train/memory.h): it draws nothing a run uses, it grows with the
// batch size, and a run trained after it ends where one trained without it ends. The run board
// (board/run_board.h) a supervisor reads after a crash, and the store's crash record.
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "board/run_board.h"
#include "config/experiment_config.h"
#include "plugins_util.h"
#include "process/supervise.h"
#include "registry.h"
#include "store/artifact_trust.h"
#include "store/results_store.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace htm {
namespace {

ResolvedConfig trees(const std::string& dir, int64_t batch, int64_t dim = 32) {
  const std::string path = dir + "/memory.toml";
  std::ofstream(path) << "[experiment]\nname = \"memory\"\nseeds = [0]\n"
                      << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 128\ntest_size = 32\n"
                      << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
                      << "[model]\ndim = " << dim << "\nheads = 2\nlayers = 4\ndropout = 0.1\n"
                      << "[train]\nepochs = 1\nbatch_size = " << batch << "\nimages = 0\ncheckpoint = false\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\nartifacts = \"" << dir
                      << "/runs\"\n";
  ExperimentFile file = ExperimentFile::load(path);
  return file.resolve(file.variants()[0], htm::testing::plugins());
}

std::vector<float> weights_after_training(Experiment& ex, const std::string& dir, const std::string& name) {
  ResultsStore store(dir + "/" + name + ".sqlite");
  RunInfo info;
  info.experiment = "memory";
  info.variant = name;
  Trainer(ex, store, store.begin_run(info), dir + "/runs-" + name, 0, name).run();
  std::vector<float> all;
  for (const auto& p : ex.model->parameters()) {
    auto flat = p.detach().flatten().contiguous();
    all.insert(all.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
  }
  return all;
}

TEST(MemoryEstimate, DrawsNothingARunUsesSoAnEstimatedRunEndsWhereAnotherEnds) {
  const std::string dir = htm::testing::fresh_dir("memory_same");
  Experiment plain = assemble(trees(dir, 16), htm::testing::plugins(), 0);
  const std::vector<float> expected = weights_after_training(plain, dir, "plain");

  Experiment estimated = assemble(trees(dir, 16), htm::testing::plugins(), 0);
  const torch::Tensor before = at::detail::getDefaultCPUGenerator().get_state();
  const bool training = estimated.model->is_training();
  const MemoryEstimate e = estimate_training_memory(estimated);
  EXPECT_TRUE(torch::equal(before, at::detail::getDefaultCPUGenerator().get_state())) << "the global stream moved";
  EXPECT_EQ(estimated.model->is_training(), training);
  EXPECT_EQ(e.parameters, estimated.parameters);
  EXPECT_EQ(e.trained, estimated.participating);
  EXPECT_DOUBLE_EQ(e.gradients_mib, 4.0 * static_cast<double>(e.trained) / (1 << 20));
  EXPECT_DOUBLE_EQ(e.moments_mib, 2 * e.gradients_mib);
  EXPECT_GT(e.resident_mib, 0);
  EXPECT_GT(e.activations_mib, 0);
  EXPECT_EQ(weights_after_training(estimated, dir, "estimated"), expected);
}

TEST(MemoryEstimate, ActivationsGrowWithTheBatchAndTheTotalAddsItsParts) {
  const std::string dir = htm::testing::fresh_dir("memory_batch");
  Experiment small = assemble(trees(dir, 8), htm::testing::plugins(), 0);
  Experiment large = assemble(trees(dir, 64), htm::testing::plugins(), 0);
  const MemoryEstimate a = estimate_training_memory(small), b = estimate_training_memory(large);
  EXPECT_EQ(a.batch, 8);
  EXPECT_EQ(b.batch, 64);
  EXPECT_GT(b.activations_mib, 2 * a.activations_mib) << a.activations_mib << " vs " << b.activations_mib;
  EXPECT_DOUBLE_EQ(b.total_mib(), b.resident_mib + std::max(b.baselines_mib, b.gradients_mib + b.moments_mib +
                                                                                 b.activations_mib + b.evaluation_mib));
  EXPECT_GT(b.evaluation_mib, 0);
  EXPECT_LT(b.evaluation_mib / b.eval_batch, b.activations_mib / b.batch) << "per row: evaluation keeps no graph";
  EXPECT_NE(describe(b).find("at batch 64"), std::string::npos) << describe(b);
}

// The estimate extrapolates a training step's peak (forward, objective, backward) from two tiny
// batches: at batch 64 it is within 15 % of the peak of a step at 64, and no gradient is left
// behind. A batch of at most 8 is measured at its own size.
TEST(MemoryEstimate, TheStepPeakExtrapolatedFromTinyBatchesIsThePeakAtTheBatch) {
  const std::string dir = htm::testing::fresh_dir("memory_pass");
  Experiment ex = assemble(trees(dir, 64), htm::testing::plugins(), 0);
  const MemoryEstimate e = estimate_training_memory(ex);
  ex.model->train();
  const double measured = step_peak_mib(ex, 64);
  EXPECT_NEAR(e.activations_mib, measured, 0.15 * measured) << e.activations_mib << " MiB vs " << measured;
  for (const auto& p : ex.model->parameters()) EXPECT_FALSE(p.grad().defined()) << "gradients left behind";
  EXPECT_GT(measured, 2 * step_peak_mib(ex, 8)) << "grows with the batch";
  ex.model->eval();
  EXPECT_LT(eval_peak_mib(ex, 64), 0.5 * measured) << "a pass without gradients keeps no graph";
}

// Wide and short: the parameters' gradients, made last in backward, set a step's peak over a few
// samples, the forward graph over many. The peak grows by 0.9 MiB a sample from 4 to 8 samples
// and by 1.9 from 32 to 64, so a line through the peaks at 4 and 8 falls a third short at 64;
// each moment extrapolated on its own does not (on an AMD EPYC: 81 MiB by the line, 123.5
// measured and estimated; the bounds leave room for other CPUs' kernels).
TEST(MemoryEstimate, APeakThatMovesAsTheBatchGrowsIsFoundAtTheBatch) {
  const std::string dir = htm::testing::fresh_dir("memory_moves");
  Experiment ex = assemble(trees(dir, 64, 256), htm::testing::plugins(), 0);
  const MemoryEstimate e = estimate_training_memory(ex);
  ex.model->train();
  const double measured = step_peak_mib(ex, 64), at4 = step_peak_mib(ex, 4), at8 = step_peak_mib(ex, 8);
  const double through_the_peaks = at8 + (at8 - at4) / 4 * 56;
  EXPECT_LT(through_the_peaks, 0.85 * measured)
      << "the case this test is for: " << through_the_peaks << " vs " << measured;
  EXPECT_NEAR(e.activations_mib, measured, 0.1 * measured) << e.activations_mib << " MiB vs " << measured;
}

TEST(MemoryEstimate, EachMomentIsExtrapolatedAndTheLargestTaken) {
  // Two phases: the first holds 10 MiB + 1 a sample, the second 1 MiB + 3 a sample.
  const HeapTrace at2 = {12, 7}, at4 = {14, 13};
  EXPECT_DOUBLE_EQ(extrapolate_peak(at2, 2, at4, 4, 4), 14) << "at the larger pass: its own peak";
  EXPECT_DOUBLE_EQ(extrapolate_peak(at2, 2, at4, 4, 8), 25) << "the second phase passes the first";
  const HeapTrace other = {12, 7, 1};
  EXPECT_DOUBLE_EQ(extrapolate_peak(other, 2, at4, 4, 8), 18) << "traces that differ: the line through the peaks";
}

// A run whose data and weights cannot fit is refused at the allocation that passes what is
// available, by the allocating code whatever it is; freed tensors are not counted.
TEST(MemoryEstimate, AnAllocationPastTheMemoryAvailableIsRefused) {
  const AvailableMemory available{64, "HTM_MEMORY_AVAILABLE_MIB"};
  {
    AllocationLimit limit("study/v seed 0", available);
    for (int i = 0; i < 32; ++i) torch::Tensor freed = torch::zeros({1 << 20});  // 4 MiB each, freed each time
    EXPECT_LT(limit.counted_mib(), 1);
    const torch::Tensor kept = torch::zeros({8 << 20});  // 32 MiB, kept
    EXPECT_NEAR(limit.counted_mib(), 32, 1);
    try {
      torch::nn::Linear layer(4096, 4096);  // 64 MiB of weights: past 64 with the 32 kept
      FAIL() << "allocated past the limit";
    } catch (const MemoryRefused& e) {
      EXPECT_STREQ(e.what(),
                   "[study/v seed 0] needs more than the 64 MiB available (HTM_MEMORY_AVAILABLE_MIB) to be assembled: "
                   "its data and weights held 32 MiB when 64 MiB more were asked to allocate; htm run --ignore-memory "
                   "trains it anyway");
    }
  }
  const torch::Tensor unlimited = torch::empty({32 << 20});  // 128 MiB: no limit once it is gone
  EXPECT_EQ(unlimited.numel(), 32 << 20);
}

TEST(KeepFreedMemory, AfterItAFreedBlockOf8MiBStaysWithTheHeapAndComesBack) {
  keep_freed_memory();  // once per process: set here, or by a run before this test
  if (malloc_left_alone(std::getenv("GLIBC_TUNABLES"), std::getenv("HTM_MALLOC"))) GTEST_SKIP();
  const size_t mapped = mallinfo2().hblkhd;
  auto* block = static_cast<char*>(std::malloc(8 << 20));
  std::memset(block, 1, 8 << 20);
  EXPECT_EQ(mallinfo2().hblkhd, mapped) << "8 MiB mapped on its own: the threshold is still glibc's";
  const size_t heap = mallinfo2().arena;
  std::free(block);
  EXPECT_EQ(mallinfo2().arena, heap) << "the heap's top went back to the system";
  auto* again = static_cast<char*>(std::malloc(8 << 20));
  EXPECT_EQ(mallinfo2().arena, heap) << "the same block again grew the heap";
  std::free(again);
}

TEST(KeepFreedMemory, GlibcTunablesOrHtmMallocDefaultLeaveGlibcAlone) {
  EXPECT_FALSE(malloc_left_alone(nullptr, nullptr));
  EXPECT_FALSE(malloc_left_alone("glibc.malloc.tcache_count=2000", nullptr));
  EXPECT_TRUE(malloc_left_alone("glibc.malloc.mmap_threshold=1048576", nullptr));
  EXPECT_TRUE(malloc_left_alone("glibc.malloc.tcache_count=0:glibc.malloc.trim_threshold=1", nullptr));
  EXPECT_TRUE(malloc_left_alone(nullptr, "default"));
  EXPECT_FALSE(malloc_left_alone(nullptr, "keep"));
  keep_freed_memory();
  EXPECT_FALSE(keep_freed_memory()) << "once per process";
}

// A block the system will not give at all (past the address space) never reaches AllocationLimit:
// libtorch's allocator throws first. Its refusal is named with the size, as bad input.
TEST(MemoryEstimate, AnAllocationTheSystemRefusesIsNamedWithItsSize) {
  const AvailableMemory available{100, "HTM_MEMORY_AVAILABLE_MIB"};
  try {
    const torch::Tensor huge = torch::empty({int64_t{1} << 58});  // 2^60 bytes
    FAIL() << "allocated " << huge.numel() << " floats";
  } catch (const c10::Error& e) {
    const std::optional<MemoryRefused> refused = refused_allocation(e, "study/v seed 0", available);
    ASSERT_TRUE(refused) << e.what();
    EXPECT_STREQ(refused->what(),
                 "[study/v seed 0] cannot be assembled: one of its tensors asked for 1073741824.0 GiB, which the "
                 "system refused (100 MiB available, HTM_MEMORY_AVAILABLE_MIB); is a setting far larger than meant?");
  }
  EXPECT_FALSE(
      refused_allocation(std::runtime_error("can't allocate memory: you tried to allocate 8 bytes"), "x", available))
      << "only libtorch's own refusal";
  EXPECT_FALSE(refused_allocation(c10::Error("shape mismatch", ""), "x", available));
}

TEST(MemoryEstimate, HtmMemoryAvailableMibStandsForASmallerMachine) {
  setenv("HTM_MEMORY_AVAILABLE_MIB", "123", 1);
  const AvailableMemory simulated = available_memory();
  unsetenv("HTM_MEMORY_AVAILABLE_MIB");
  EXPECT_DOUBLE_EQ(simulated.mib, 123);
  EXPECT_EQ(simulated.source, "HTM_MEMORY_AVAILABLE_MIB");
  const AvailableMemory real = available_memory();
  EXPECT_GT(real.mib, 0);
}

TEST(RunBoard, AChildsRunStepAndPluginAreWhatItsSupervisorReads) {
  int fd = -1;
  const std::string path = create_run_board(&fd);
  RunBoard board{};
  ASSERT_TRUE(read_run_board(fd, &board));
  EXPECT_EQ(board.run_id, 0);
  EXPECT_EQ(board.current, -1);
  EXPECT_EQ(board_plugin_text(board), "");
  // This process plays the child: the board is found through HTM_RUN_BOARD.
  setenv("HTM_RUN_BOARD", path.c_str(), 1);
  ASSERT_TRUE(open_run_board());
  EXPECT_FALSE(std::filesystem::exists(path)) << "mapped: the name is gone, nothing to leave behind";
  board_run(42, "/tmp/x.sqlite", "study/v seed 1");
  board_step(13, 64);
  int previous = 0;
  const int slot = board_building(PluginKind::policy, "crashy", "1.2.3", "/p/htm_policy_crashy.so", &previous);
  ASSERT_TRUE(read_run_board(fd, &board));
  EXPECT_EQ(board_plugin_text(board), "policy plugin 'crashy' 1.2.3 (/p/htm_policy_crashy.so)") << "while building";
  const int object = 0;
  board_built(slot, &object, previous);
  ASSERT_TRUE(read_run_board(fd, &board));
  EXPECT_EQ(board_plugin_text(board), "") << "built: no plugin executing";
  {
    const char* previous_call = nullptr;
    const uint64_t beats = board.beats;
    const int token = board_enter(&object, "choose_merges", &previous_call);
    ASSERT_TRUE(read_run_board(fd, &board));
    EXPECT_EQ(board_plugin_text(board), "policy plugin 'crashy' 1.2.3 (/p/htm_policy_crashy.so)");
    EXPECT_EQ(board_plugin_text(board, true),
              "policy plugin 'crashy' 1.2.3 (/p/htm_policy_crashy.so) in choose_merges");
    EXPECT_GT(board.beats, beats) << "a plugin call is progress";
    board_leave(token, previous_call);
  }
  ASSERT_TRUE(read_run_board(fd, &board));
  EXPECT_EQ(board.run_id, 42);
  EXPECT_EQ(board.step, 13);
  EXPECT_EQ(board.total_steps, 64);
  EXPECT_STREQ(board.db, "/tmp/x.sqlite");
  EXPECT_STREQ(board.label, "study/v seed 1");
  EXPECT_EQ(board.current, -1);
  EXPECT_STREQ(board.call, "") << "left: no call executing";
  EXPECT_EQ(board.stall_timeout_s, -1) << "not read from a config yet";
  {
    PhaseScope phase(BoardPhase::checkpointing);
    board_stall_timeout(7);
    board_step_seconds(0.25);
    board_step_seconds(0.125);
    ASSERT_TRUE(read_run_board(fd, &board));
    EXPECT_EQ(board.phase, static_cast<int32_t>(BoardPhase::checkpointing));
    EXPECT_EQ(board.stall_timeout_s, 7);
    EXPECT_EQ(board.slowest_step_ms, 250) << "the slowest step is kept";
  }
  ASSERT_TRUE(read_run_board(fd, &board));
  EXPECT_EQ(board.phase, static_cast<int32_t>(BoardPhase::training)) << "the phase before the scope: board_step's";
  close_run_board();
  unsetenv("HTM_RUN_BOARD");
  close(fd);
}

// What the watchdog says within 3 s, read every 100 ms ("" when it said nothing).
std::string first_stall(Watchdog& watchdog) {
  std::string said;
  for (int i = 0; i < 30 && said.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    said = watchdog.stalled();
  }
  return said;
}

// The supervisor's watchdog on a child's board (this process plays both): quiet while the beats
// move or the child waits in a collective; once they stop for the stall timeout, it says so.
TEST(Watchdog, FiresOnlyWhenTheBeatsStopForTheStallTimeout) {
  ChildBoard child;
  const std::string environment = child.environment();
  setenv("HTM_RUN_BOARD", environment.substr(environment.find('=') + 1).c_str(), 1);
  ASSERT_TRUE(open_run_board());
  board_attempt("study/v seed 0", "v", 0);
  board_stall_timeout(1);
  Watchdog watchdog(child);
  const auto wait = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  for (int i = 0; i < 5; ++i) {  // 1.25 s of progress: no stall
    board_step(i + 1, 100);
    wait(250);
    EXPECT_EQ(watchdog.stalled(), "") << "step " << i + 1;
  }
  {
    PhaseScope waiting(BoardPhase::collective);  // a peer's stall: not this child's to be named for
    wait(1200);
    EXPECT_EQ(watchdog.stalled(), "");
  }
  wait(600);
  EXPECT_EQ(watchdog.stalled(), "") << "the collective's end is progress";
  const std::string said = first_stall(watchdog);
  EXPECT_EQ(said, "no progress for 1 s (runtime.stall_timeout 1 s)");
  board_stall_timeout(0);
  Watchdog off(child);
  wait(1200);
  EXPECT_EQ(off.stalled(), "") << "0: no watchdog";
  close_run_board();
  unsetenv("HTM_RUN_BOARD");
}

// A child that takes longer to start than its run's stall limit (loading libtorch and reading its
// config on a loaded machine, no beat until then) is not stalled when the limit appears: the limit
// counts from when it is known. It used to count from the spawn, and a rank restarted under load
// was killed "while starting" the moment it published 3 s.
TEST(Watchdog, AStartSlowerThanTheLimitIsNotAStall) {
  ChildBoard child;
  const std::string environment = child.environment();
  setenv("HTM_RUN_BOARD", environment.substr(environment.find('=') + 1).c_str(), 1);
  Watchdog watchdog(child);  // the supervisor watches from the spawn
  const auto wait = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  wait(1300);
  ASSERT_TRUE(open_run_board());
  EXPECT_EQ(watchdog.stalled(), "") << "no limit yet";
  board_stall_timeout(1);
  wait(600);
  EXPECT_EQ(watchdog.stalled(), "") << "the limit counts from when it is known";
  const std::string said = first_stall(watchdog);
  EXPECT_EQ(said, "no progress for 1 s (runtime.stall_timeout 1 s)") << "a stall after it is still one";
  close_run_board();
  unsetenv("HTM_RUN_BOARD");
}

// A run's identity for the crash records' tests, its folder under `dir`'s runs, which htm run
// marked (a resume reads and writes only there).
RunInfo crash_run(const std::string& dir) {
  RunInfo info;
  info.experiment = "e";
  info.variant = "v";
  info.config_hash = "h";
  mark_artifacts_root(dir + "/runs");
  info.artifact_dir = dir + "/runs/e/v";
  return info;
}

TEST(CrashRecord, CountsCrashesAtOneStepAndHoldsTheRunAtTheSecond) {
  const std::string dir = htm::testing::fresh_dir("crash_record");
  ResultsStore store(dir + "/db.sqlite");
  const RunInfo info = crash_run(dir);
  const Claim first = store.claim_run(info, false);
  const int64_t me = RunOwner::self().pid;
  EXPECT_EQ(store.record_crash(first.run_id, me + 1, 5, "crashed: SIGSEGV"), 0) << "another process's run";
  EXPECT_EQ(store.record_crash(first.run_id, me, 5, "crashed: SIGSEGV at step 5"), 1);
  EXPECT_EQ(store.record_crash(first.run_id, me, 5, "again"), 0) << "already recorded";
  const Claim second = store.claim_run(info, false);
  EXPECT_EQ(second.outcome, Claim::Outcome::resumed);
  EXPECT_EQ(second.run_id, first.run_id);
  EXPECT_EQ(second.detail, "crashed at step 5");
  EXPECT_EQ(store.record_crash(first.run_id, me, 5, "crashed: SIGSEGV at step 5"), 2);
  const Claim third = store.claim_run(info, false);
  EXPECT_EQ(third.outcome, Claim::Outcome::held);
  EXPECT_EQ(third.detail, "it crashed 2 times at step 5");
  auto error = store.query("SELECT error FROM runs WHERE id = ?", {first.run_id});
  EXPECT_NE(error.rows[0][0].find("htm resume " + std::to_string(first.run_id) + " --force retries it"),
            std::string::npos);
  const Claim retried = store.claim_run(info, false, true);
  EXPECT_EQ(retried.outcome, Claim::Outcome::resumed);
  EXPECT_EQ(store.record_crash(first.run_id, me, 9, "crashed elsewhere"), 1) << "another step starts the count again";
}

// A sibling process may settle a crashed child's row as killed (its owner is gone) before the
// supervisor records the crash: the crash is recorded all the same (the fault suite's crash
// section saw 'killed' under load, and the study's exit code became the child's signal's).
TEST(CrashRecord, ACrashIsRecordedOverAKilledSettlementOfTheSameOwner) {
  const std::string dir = htm::testing::fresh_dir("crash_record_killed");
  ResultsStore store(dir + "/db.sqlite");
  const RunInfo info = crash_run(dir);
  const Claim first = store.claim_run(info, false);
  const int64_t me = RunOwner::self().pid;
  store.query("UPDATE runs SET status = 'killed' WHERE id = ?", {first.run_id}, true);  // what settle_stale writes
  EXPECT_EQ(store.record_crash(first.run_id, me + 1, 5, "crashed: SIGSEGV"), 0) << "another process's run";
  EXPECT_EQ(store.record_crash(first.run_id, me, 5, "crashed: SIGSEGV at step 5"), 1);
  auto row = store.query("SELECT status, error FROM runs WHERE id = ?", {first.run_id});
  EXPECT_EQ(row.rows[0][0], "failed");
  EXPECT_EQ(row.rows[0][1], "crashed: SIGSEGV at step 5");
  // Resumed since (another owner): no longer the supervisor's to say.
  const Claim resumed = store.claim_run(info, false);
  ASSERT_EQ(resumed.outcome, Claim::Outcome::resumed);
  store.query("UPDATE runs SET status = 'killed', owner_pid = ? WHERE id = ?", {me + 1, first.run_id}, true);
  EXPECT_EQ(store.record_crash(first.run_id, me, 5, "crashed: SIGSEGV at step 5"), 0);
}

}  // namespace
}  // namespace htm
