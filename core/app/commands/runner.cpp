#include "commands/runner.h"

#include "commands/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "board/run_board.h"
#include "commands/run_one.h"
#include "commands/run_record.h"
#include "commands/selection.h"
#include "dist/communicator.h"
#include "file_checks.h"
#include "htm/adapter.h"
#include "htm/error.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "htm/sets.h"
#include "process/launch.h"
#include "process/signals.h"
#include "process/supervise.h"
#include "store/results_store.h"
#include "study/seed_ledger.h"
#include "train/memory.h"

namespace htm {
namespace {

std::map<std::string, std::string> tags_of(const RunRequest& request) {
  std::map<std::string, std::string> tags;
  for (const auto& t : request.tags) tags.insert(key_value("--tag", t));
  if (!request.note.empty()) tags["note"] = request.note;
  if (request.confirm) tags["phase"] = "confirm";
  return tags;
}

// This rank's group; every rank must be given the same runs with the same configs.
std::unique_ptr<Communicator> rank_group(const WorldInfo& world, const std::vector<PlannedRun>& work) {
  std::string runs;
  int64_t stall = 0;  // the longest runtime.stall_timeout; 0 anywhere: no watchdog
  bool watched = true;
  for (const auto& run : work) {
    const RuntimeSettings& runtime = run.config->settings.runtime;
    runs += run.variant + "\n" + std::to_string(run.seed) + "\n" + run.config->hash + "\n";
    stall = std::max(stall, runtime.stall_timeout);
    watched = watched && runtime.stall_timeout > 0;
  }
  const std::string identity = "runs " + std::to_string(work.size()) + ", hash " + sha256_hex(runs).substr(0, 16);
  // The collective timeout follows the watchdog's, 30 s later: a stalled rank's watchdog names it
  // before the ranks waiting for it time out (without a watchdog: 30 minutes).
  const char* timeout = std::getenv("HTM_DIST_TIMEOUT");
  const int64_t seconds = timeout ? std::max(1, std::atoi(timeout)) : watched ? stall + 30 : 1800;
  return std::make_unique<Communicator>(world, identity, std::chrono::seconds(seconds));
}

// The five ways `htm run` trains a study's runs, one interface: each trains (or has trained) the
// runs it is given and returns the exit code (0 all finished, 1 any failed, 130 interrupted).
class Executor {
 public:
  virtual ~Executor() = default;
  virtual int run(const std::vector<PlannedRun>& work) = 0;
};

// A crash of a supervised child before its run had a row: recorded as that run's.
RecordUnclaimed crash_recorder(const StudyPlan& plan, const ExperimentFile& file, const Registry& registry) {
  return [&](const std::string& variant, int64_t seed, const std::string& message) {
    record_unclaimed_crash(*plan.config_of(variant), registry, file.path(), variant, seed, message);
  };
}

// In this process, one run after another (a supervised child, a caller that asks for no
// supervision, or the lone run of a study).
class InProcess : public Executor {
 public:
  explicit InProcess(RunContext context) : context_(std::move(context)) {}
  int run(const std::vector<PlannedRun>& work) override {
    int code = 0;
    for (const auto& planned : work) {
      if (interrupt_requested()) return 130;
      switch (run_one(planned, context_)) {
        case Outcome::interrupted:
          return 130;
        case Outcome::held:
        case Outcome::failed:
          code = 1;
          break;
        default:
          break;
      }
    }
    return code;
  }

 private:
  RunContext context_;
};

// A data-parallel rank (started by --nproc's launcher or an outside one, in its supervised child
// where it has one): rank 0 claims, trains and records each run, the others follow it (run_one
// sends them to follow_run). A failed run ends the study: a rank may be gone.
class RankGroup : public Executor {
 public:
  RankGroup(RunContext context, const WorldInfo& world) : context_(std::move(context)), world_(world) {}
  int run(const std::vector<PlannedRun>& work) override {
    std::unique_ptr<Communicator> comm = rank_group(world_, work);
    context_.comm = comm.get();
    int code = 0;
    for (const auto& planned : work) {
      switch (run_one(planned, context_)) {
        case Outcome::interrupted:
          return 130;
        case Outcome::held:
          code = 1;
          break;
        case Outcome::failed:  // a rank may be gone: the group cannot be trusted for the next run
          std::fprintf(stderr, "htm: a data-parallel run failed; the remaining runs are not started\n");
          return 1;
        default:
          break;
      }
    }
    return code;
  }

 private:
  RunContext context_;
  WorldInfo world_;
};

// Every run in a supervised child of its own, --jobs at a time (process/launch.h run_parallel).
class SupervisedJobs : public Executor {
 public:
  SupervisedJobs(const RunRequest& request, std::string logs, RecordUnclaimed record)
      : request_(request), logs_(std::move(logs)), record_(std::move(record)) {}
  int run(const std::vector<PlannedRun>& work) override {
    // Several at once: the longest first, so that the short ones fill the jobs' ends.
    return run_parallel(request_, unfinished(request_, request_.jobs > 1 ? longest_first(work) : work), logs_, record_);
  }

 private:
  const RunRequest& request_;
  std::string logs_;
  RecordUnclaimed record_;
};

// --nproc N: N rank processes on this host, each a RankGroup in a supervised child, restarted
// after a crash (process/launch.h run_ranks).
class SupervisedRanks : public Executor {
 public:
  SupervisedRanks(const RunRequest& request, RecordUnclaimed record) : request_(request), record_(std::move(record)) {}
  int run(const std::vector<PlannedRun>& work) override { return run_ranks(request_, work.size(), record_); }

 private:
  const RunRequest& request_;
  RecordUnclaimed record_;
};

// A rank an outside launcher started (torchrun, srun): it trains in a supervised child and
// records the child's crash in the run, as --nproc's launcher does for its ranks.
class OutsideRank : public Executor {
 public:
  OutsideRank(const RunRequest& request, const WorldInfo& world, const StudyPlan& plan)
      : request_(request), world_(world), plan_(plan) {}
  int run(const std::vector<PlannedRun>& /*work: the child plans them again*/) override {
    return run_outside_rank(request_, world_.rank, world_.world, [&](const std::string& variant) {
      const ResolvedConfig* config = plan_.config_of(variant);
      if (config == nullptr) throw Error("variant '" + variant + "' is not one of this study's");
      return std::make_pair(config->settings.experiment.name, config->settings.runtime.results);
    });
  }

 private:
  const RunRequest& request_;
  WorldInfo world_;
  const StudyPlan& plan_;
};

// The one place a way of running is chosen, from the request and this process's place (a rank
// of a world, a supervised child), with the checks that refuse a combination.
std::unique_ptr<Executor> choose_executor(const RunRequest& request, const std::optional<WorldInfo>& world,
                                          const StudyPlan& plan, const ExperimentFile& file, const Registry& registry) {
  RunContext context{file.path(), &registry, request.rerun, request.ignore_memory, tags_of(request), request.verbosity};
  if (request.nproc > 1) {
    if (world)
      throw Error("--nproc: this process is already rank " + std::to_string(world->rank) + " of " +
                  std::to_string(world->world) + " (WORLD_SIZE is set); launch it without --nproc");
    if (request.jobs > 1) throw Error("--nproc and --jobs cannot be combined: give the cores to one or the other");
    ResultsStore::require_sound(plan.results);  // the ranks are supervised children: they leave it to this process
    return std::make_unique<SupervisedRanks>(request, crash_recorder(plan, file, registry));
  }
  if (world && request.jobs > 1) throw Error("--jobs cannot be used by a data-parallel rank (WORLD_SIZE is set)");
  if (!world || world->rank == 0) {  // runs whose process is gone are recorded killed; they resume below
    if (!supervised_child()) ResultsStore::require_sound(plan.results);  // before this command's first write
    ResultsStore store(plan.results);
    for (int64_t id : store.settle_stale())
      std::fprintf(stderr, "note: run %lld had lost its process; recorded as killed\n", static_cast<long long>(id));
  }
  // Every run in a supervised child of its own (htm run; a caller of this function that trains
  // in-process asks for --jobs 1 without `supervise`), unless this process is one, or a rank.
  if (!world && (request.supervise || (request.jobs > 1 && plan.runs.size() > 1)) && !supervised_child())
    return std::make_unique<SupervisedJobs>(request, plan.logs, crash_recorder(plan, file, registry));
  if (world && request.supervise && !supervised_child()) return std::make_unique<OutsideRank>(request, *world, plan);
  if (world) return std::make_unique<RankGroup>(std::move(context), *world);
  return std::make_unique<InProcess>(std::move(context));
}

}  // namespace

int run_experiment(const RunRequest& request, const Registry& registry) {
  if (!supervised_child())  // said once, by the supervisor
    for (const auto& warning : registry.warnings()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  ExperimentFile file = ExperimentFile::load(request.file, request.overrides);
  for (const auto& sweep : request.sweeps) file.add_sweep(sweep);
  if (request.confirm && request.variants.empty())
    throw Error("--confirm needs --variant: confirm the variants you froze, named, not the whole study");
  for (const auto& tag : request.tags)
    if (key_value("--tag", tag).first == "phase")
      throw Error("--tag " + tag + ": the tag 'phase' is set by --confirm (runs without it are exploratory)");
  StudyPlan plan = plan_study(request, file, registry);
  int64_t grace = 0;  // the supervisor's: the longest of its runs', before any of them starts
  for (const auto& run : plan.runs) grace = std::max(grace, run.config->settings.runtime.stop_grace);
  if (!plan.runs.empty()) set_stop_grace(static_cast<int>(grace));
  const std::optional<WorldInfo> world = world_from_environment();
  if (request.confirm && !supervised_child() && (!world || world->rank == 0))  // said once, before any run
    check_fresh_data(file, registry, pairs_of(plan.runs), request.reuse_seeds);
  if (!request.shard.empty()) {  // a deterministic slice: the same on every host given the same file
    const auto [k, n] = parse_shard(request.shard);
    const size_t all = plan.runs.size();
    plan.runs = shard_of(plan.runs, k, n);
    if (request.nproc == 1 && (!world || world->rank == 0))  // said once, by the process that records
      std::fprintf(stderr, "shard %d/%d: %zu of the %zu runs\n", k, n, plan.runs.size(), all);
  }
  return choose_executor(request, world, plan, file, registry)->run(plan.runs);
}

void print_memory_estimate(const ResolvedConfig& config, const Registry& registry) {
  try {
    apply_runtime(config.settings.runtime, nullptr);
    const auto& seeds = config.settings.experiment.seeds;
    Experiment ex = assemble(config, registry, seeds.empty() ? 0 : seeds[0]);
    const MemoryEstimate memory = estimate_training_memory(ex);
    const AvailableMemory available = available_memory();
    std::printf("# parameters: %lld (%lld trained)\n# training memory estimate: %s; available: %.1f GiB (%s)\n",
                static_cast<long long>(memory.parameters), static_cast<long long>(memory.trained),
                describe(memory).c_str(), available.mib / 1024, available.source.c_str());
  } catch (const std::exception& e) {
    std::string full;
    std::printf("# training memory estimate: not available: %s\n", one_line(e, &full).c_str());
  }
}

int resume_run(int64_t run_id, const std::string& db, const std::vector<std::string>& overrides,
               const std::vector<std::string>& sweeps, const Registry& registry, bool force) {
  std::string source, variant;
  int64_t seed = 0;
  std::string hash;
  {
    ResultsStore::require_sound(db);
    ResultsStore store(db);
    store.settle_stale();
    auto row = store.query(
        "SELECT r.source_file, r.variant, r.seed, r.config_hash, r.status, coalesce(c.value, 0) "
        "FROM runs r LEFT JOIN tags c ON c.run_id = r.id AND c.key = 'crashes' WHERE r.id = ?",
        {run_id});
    if (row.rows.empty()) throw Error("results database '" + db + "' has no run " + std::to_string(run_id));
    const auto& r = row.rows[0];
    if (r[4] == "finished") throw Error("run " + std::to_string(run_id) + " has finished: nothing to resume");
    const int64_t crashes = std::atoll(r[5].c_str());
    if (r[4] == "failed" && crashes == 0)
      throw Error("run " + std::to_string(run_id) + " failed; a failed run is not resumed (htm run starts it again)");
    if (r[4] == "failed" && crashes >= kCrashesHeld && !force)
      throw Error("run " + std::to_string(run_id) + " crashed " + std::to_string(crashes) +
                  " times at one step; htm resume " + std::to_string(run_id) + " --force retries it");
    if (r[4] == "running") throw Error("run " + std::to_string(run_id) + " is still running under its process");
    source = r[0], variant = r[1], seed = std::atoll(r[2].c_str()), hash = r[3];
  }
  std::vector<std::string> settings = overrides;
  settings.push_back("runtime.results=" + to_toml(Value(db)));  // the database it is recorded in
  ExperimentFile file = ExperimentFile::load(source, settings);
  for (const auto& sweep : sweeps) file.add_sweep(sweep);
  const auto config = std::make_shared<const ResolvedConfig>(file.resolve(variant, registry));
  if (config->hash != hash)
    throw Error("'" + source + "' now resolves to another config for variant '" + variant + "' (hash " + config->hash +
                "; run " + std::to_string(run_id) + " has " + hash +
                "): give the --set options it was started with, or restore the file");
  RunContext context{file.path(), &registry};
  context.expected_run = run_id, context.retry_crashed = force;
  switch (run_one({variant, seed, config}, context)) {
    case Outcome::interrupted:
      return 130;
    case Outcome::failed:
    case Outcome::held:
      return 1;
    default:
      return 0;
  }
}

}  // namespace htm
