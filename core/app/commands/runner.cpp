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
#include "commands/run_lines.h"
#include "commands/run_record.h"
#include "commands/seed_ledger.h"
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
#include "train/memory.h"

namespace htm {
namespace {

// held: a run not resumed because it crashed too often at one step; failed for the exit code,
// but every rank skipped it together, so a data-parallel group goes on to the next run.
enum class Outcome { finished, skipped, failed, held, interrupted };

// What the request asks of runs it finds unfinished (htm resume names one, --force retries a held one).
struct Continue {
  int64_t expected_run = 0;    ///< the run htm resume names (0: whichever claim_run finds)
  bool retry_crashed = false;  ///< resume a run held after crashing twice at one step
};

std::map<std::string, std::string> tags_of(const RunRequest& request) {
  std::map<std::string, std::string> tags;
  for (const auto& t : request.tags) tags.insert(key_value("--tag", t));
  if (!request.note.empty()) tags["note"] = request.note;
  if (request.confirm) tags["phase"] = "confirm";
  return tags;
}

constexpr int kRunBusyTimeoutMs = 10 * 60 * 1000;  // a run waits up to 10 minutes for an outside lock

// The first line of an exception's text, without libtorch's backtrace; the whole text goes to
// the run's error.log.
std::string one_line(const std::exception& e, std::string* full) {
  std::string text = e.what();
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) text = c10->what_without_backtrace();
  *full = e.what();
  const size_t newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline) + " (more in error.log)";
}

// A run's [runtime] in force: its threads (or this host's cores shared by its ranks when 0) and
// its precision. Returns whether bf16 was asked for but fell back to fp32.
bool apply_runtime(const RuntimeSettings& runtime, const Communicator* comm) {
  int64_t threads = runtime.threads;
  if (threads == 0 && comm != nullptr)
    threads = std::max<int64_t>(1, std::thread::hardware_concurrency() / comm->info().local_world);
  board_stall_timeout(runtime.stall_timeout);  // the supervisor's watchdog reads it
  set_stop_grace(static_cast<int>(runtime.stop_grace));
  return use_runtime(runtime, threads) != runtime.precision;
}

// Data-parallel: what rank 0 decided for a run, sent to every rank (one broadcast per run).
enum Decision : int64_t { kSkip = 0, kStart = 1, kResume = 2 };
int64_t share_decision(Communicator* comm, int64_t decision) {
  if (comm == nullptr) return decision;
  auto t = torch::tensor({decision}, torch::kLong);
  comm->broadcast(t);
  return t.item<int64_t>();
}

// A rank other than 0: trains the run rank 0 decided on, recording into a private in-memory store.
Outcome follow_run(const PlannedRun& planned, const std::string& file, const Registry& registry, Communicator& comm) {
  const ResolvedConfig& config = *planned.config;
  const std::string& variant = planned.variant;
  const int64_t seed = planned.seed;
  apply_runtime(config.settings.runtime, &comm);
  const std::string run = planned.label();
  const std::string label = run + ", rank " + std::to_string(comm.rank());
  const int64_t decision = share_decision(&comm, kSkip);
  if (decision == kSkip) return Outcome::skipped;
  board_attempt(run, variant, seed);  // the run it follows, for its supervisor (rank 0 claims it)
  Experiment ex = assemble(config, registry, seed, comm.info().local_rank);
  ResultsStore scratch(":memory:");
  const int64_t run_id = scratch.begin_run(describe(config, registry, file, seed));
  TrainerOptions options;
  options.resume = decision == kResume;
  options.verbosity = 0;
  options.comm = &comm;
  try {
    Trainer(ex, scratch, run_id, "", seed, label, options).run();
    return Outcome::finished;
  } catch (const Interrupted&) {
    return Outcome::interrupted;
  } catch (const std::exception& e) {
    std::string full;
    std::fprintf(stderr, "error: [%s] %s\n", label.c_str(), one_line(e, &full).c_str());
    return Outcome::failed;
  }
}

// Memory before the first step: a run that would not fit is refused here, like bad input.
MemoryEstimate check_memory(Experiment& ex, const std::string& label, bool ignore_memory) {
  MemoryEstimate memory = estimate_training_memory(ex);
  const AvailableMemory available = available_memory();
  if (!ignore_memory && available.mib > 0 && memory.total_mib() > available.mib) {
    char have[64];
    if (available.mib >= 1024)
      std::snprintf(have, sizeof have, "%.1f GiB", available.mib / 1024);
    else
      std::snprintf(have, sizeof have, "%.0f MiB", available.mib);
    throw Error("[" + label + "] needs about " + describe(memory) + " to train, more than the " + have +
                " available (" + available.source + "); htm run --ignore-memory trains it anyway");
  }
  return memory;
}

// A claim said: how the run ends here when it is not to be trained, else nothing.
std::optional<Outcome> say_claim(const Claim& claim, const std::string& label, const std::string& db) {
  switch (claim.outcome) {
    case Claim::Outcome::finished:
      std::printf("[%s] already finished as run %lld in %s; skipped (--rerun runs it again)\n", label.c_str(),
                  static_cast<long long>(claim.run_id), db.c_str());
      return Outcome::skipped;
    case Claim::Outcome::taken:
      std::printf("[%s] run %lld is being trained by another process (%s); skipped\n", label.c_str(),
                  static_cast<long long>(claim.run_id), claim.detail.c_str());
      return Outcome::skipped;
    case Claim::Outcome::held:
      if (claim.folder_refused) {  // not a folder htm wrote here: --force would not help, a fresh run would
        std::fprintf(stderr, "error: [%s] run %lld is not resumed: %s (htm run --rerun trains it afresh here)\n",
                     label.c_str(), static_cast<long long>(claim.run_id), claim.detail.c_str());
        return Outcome::held;
      }
      std::fprintf(stderr,
                   "error: [%s] run %lld is not resumed: %s (htm runs shows the error; htm resume %lld "
                   "--force retries it)\n",
                   label.c_str(), static_cast<long long>(claim.run_id), claim.detail.c_str(),
                   static_cast<long long>(claim.run_id));
      return Outcome::held;
    case Claim::Outcome::resumed:
      std::fprintf(stderr, "[%s] resuming run %lld (it was %s)\n", label.c_str(), static_cast<long long>(claim.run_id),
                   claim.detail.c_str());
      break;
    case Claim::Outcome::started:
      break;
  }
  return std::nullopt;
}

// A run that failed: its row, one line on the terminal, the whole text (a backtrace, if any) in
// its error.log.
Outcome record_failure(ResultsStore& store, const Claim& claim, const std::string& label, const std::string& message,
                       const std::string& full) {
  std::error_code ec;
  std::filesystem::create_directories(claim.artifact_dir, ec);
  if (FILE* log = std::fopen((claim.artifact_dir + "/error.log").c_str(), "w")) {
    std::fprintf(log, "%s\n\n%s\n", message.c_str(), full.c_str());
    std::fclose(log);
  }
  store.finish_run(claim.run_id, RunStatus::failed, message);
  std::fprintf(stderr, "\nerror: [%s] run %lld failed: %s\n", label.c_str(), static_cast<long long>(claim.run_id),
               message.c_str());
  return Outcome::failed;
}

// Trains a claimed run and records how it ended.
Outcome train_claimed(Experiment& ex, ResultsStore& store, const Claim& claim, const std::string& label, int64_t seed,
                      const Registry& registry, const std::optional<MemoryEstimate>& memory, int verbosity,
                      Communicator* comm) {
  try {
    TrainerOptions options;
    options.resume = claim.outcome == Claim::Outcome::resumed;
    options.verbosity = verbosity;
    options.comm = comm;
    Trainer trainer(ex, store, claim.run_id, claim.artifact_dir, seed, label, options);
    const TrainSummary s = trainer.run();
    store.finish_run(claim.run_id, RunStatus::finished);
    print_finished(store, claim.run_id, label, s, ex.participating, memory, verbosity);
    return Outcome::finished;
  } catch (const DatabaseCorrupt& e) {  // nothing more into that file: the run's checkpoint is its record
    board_database_corrupt();
    std::fprintf(stderr, "\nerror: [%s] run %lld stopped at a checkpoint in %s: %s\n", label.c_str(),
                 static_cast<long long>(claim.run_id), claim.artifact_dir.c_str(), e.what());
    return Outcome::failed;
  } catch (const Interrupted&) {
    store.finish_run(claim.run_id, RunStatus::interrupted, "interrupted by a signal; htm run resumes it");
    std::fprintf(stderr, "\n[%s] run %lld interrupted; recorded as such (running the same command resumes it)\n",
                 label.c_str(), static_cast<long long>(claim.run_id));
    return Outcome::interrupted;
  } catch (const std::exception& e) {
    if (comm != nullptr && interrupt_requested()) {  // stopping: a peer rank stopped first, or was killed at the grace
      store.finish_run(claim.run_id, RunStatus::interrupted, "interrupted by a signal; htm run resumes it");
      std::fprintf(stderr, "\n[%s] run %lld interrupted (the other ranks stopped first); htm run resumes it\n",
                   label.c_str(), static_cast<long long>(claim.run_id));
      return Outcome::interrupted;
    }
    std::string full, message = one_line(e, &full);
    const PluginFault fault = take_plugin_fault();
    if (dynamic_cast<const NonFinite*>(&e) != nullptr)
      message = "training diverged: " + message;
    else if (fault.object != nullptr)
      message = registry.describe(fault.object) + " failed: " + message;
    return record_failure(store, claim, label, message, full);
  }
}

// One run of the plan, from experiment file `file`.
Outcome run_one(const PlannedRun& planned, const std::string& file, bool rerun, bool ignore_memory,
                const Registry& registry, const std::map<std::string, std::string>& tags = {}, int verbosity = 1,
                Continue resume = {}, Communicator* comm = nullptr) {
  const int64_t expected_run = resume.expected_run;
  if (comm != nullptr && comm->rank() != 0) return follow_run(planned, file, registry, *comm);
  const ResolvedConfig& config = *planned.config;
  const std::string& variant = planned.variant;
  const int64_t seed = planned.seed;
  const bool bf16_fell_back = apply_runtime(config.settings.runtime, comm);
  const std::string label = planned.label();
  ResultsStore store(config.settings.runtime.results);
  store.set_busy_timeout(kRunBusyTimeoutMs);
  if (crashed_in_this_launch(label)) {  // as a single run's crash: the next htm run resumes it
    std::fprintf(stderr, "[%s] crashed in this htm run; the next htm run resumes it\n", label.c_str());
    share_decision(comm, kSkip);
    return Outcome::held;
  }
  if (!rerun && expected_run == 0) {  // the cheap answer first: no need to load data for a finished run
    if (auto done = store.find_finished(config.experiment, variant, seed, config.hash)) {
      std::printf("[%s] already finished as run %lld in %s; skipped (--rerun runs it again)\n", label.c_str(),
                  static_cast<long long>(*done), store.path().c_str());
      share_decision(comm, kSkip);
      return Outcome::skipped;
    }
  }
  // Assembling builds the plugins and runs a first forward pass. A bad setting a plugin refuses
  // (htm::Error from its constructor) is bad input: nothing is recorded. An exception out of a
  // plugin's code is that plugin's fault: the run is recorded as failed with it.
  std::optional<Experiment> ex;
  std::string early_message, early_full;
  board_attempt(label, variant, seed);  // a crash from here to the claim is this run's
  take_plugin_fault();
  try {
    std::optional<AllocationLimit> limit;  // data and weights that cannot fit are refused as they are allocated
    if (const AvailableMemory available = available_memory(); !ignore_memory && comm == nullptr && available.mib > 0)
      limit.emplace(label, available);
    ex = assemble(config, registry, seed, comm != nullptr ? comm->info().local_rank : 0);
  } catch (const MemoryRefused&) {
    take_plugin_fault();  // refused as bad input, whatever code was allocating
    throw;
  } catch (const std::exception& e) {
    const PluginFault fault = take_plugin_fault();
    if (fault.object == nullptr && dynamic_cast<const Error*>(&e) != nullptr) {
      share_decision(comm, kSkip);  // the other ranks stop waiting for this run
      throw;
    }
    early_message = one_line(e, &early_full);
    if (fault.object != nullptr) early_message = registry.describe(fault.object) + " failed: " + early_message;
  }
  std::optional<MemoryEstimate> memory;
  if (ex && comm == nullptr) memory = check_memory(*ex, label, ignore_memory);

  RunInfo info = describe(config, registry, file, seed);
  info.artifact_dir = artifact_dir(config, variant, seed);
  const Claim claim = store.claim_run(info, rerun, resume.retry_crashed);
  if (expected_run != 0 && claim.run_id != expected_run && claim.outcome != Claim::Outcome::finished)
    throw Error("run " + std::to_string(expected_run) + " is not the latest unfinished run of " + label +
                " (that is run " + std::to_string(claim.run_id) + ")");
  const bool train = ex && (claim.outcome == Claim::Outcome::started || claim.outcome == Claim::Outcome::resumed);
  if (train || claim.outcome == Claim::Outcome::held) board_run(claim.run_id, store.path(), label);
  share_decision(comm, !train ? kSkip : claim.outcome == Claim::Outcome::resumed ? kResume : kStart);
  if (const auto said = say_claim(claim, label, store.path())) return *said;
  std::map<std::string, std::string> run_tags = tags;
  if (bf16_fell_back) run_tags["precision"] = "fp32: bf16 asked, no bf16 instructions";
  store.set_tags(claim.run_id, run_tags);
  if (!ex) return record_failure(store, claim, label, early_message, early_full);
  return train_claimed(*ex, store, claim, label, seed, registry, memory, verbosity, comm);
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
  std::vector<PlannedRun>& work = plan.runs;
  const std::string &results = plan.results, &logs = plan.logs;
  int64_t grace = 0;  // the supervisor's: the longest of its runs', before any of them starts
  for (const auto& run : work) grace = std::max(grace, run.config->settings.runtime.stop_grace);
  if (!work.empty()) set_stop_grace(static_cast<int>(grace));
  const std::optional<WorldInfo> world = world_from_environment();
  if (request.confirm && !supervised_child() && (!world || world->rank == 0))  // said once, before any run
    check_fresh_data(file, registry, pairs_of(work), request.reuse_seeds);
  if (!request.shard.empty()) {  // a deterministic slice: the same on every host given the same file
    const auto [k, n] = parse_shard(request.shard);
    const size_t all = work.size();
    work = shard_of(work, k, n);
    if (request.nproc == 1 && (!world || world->rank == 0))  // said once, by the process that records
      std::fprintf(stderr, "shard %d/%d: %zu of the %zu runs\n", k, n, work.size(), all);
  }
  if (request.nproc > 1) {
    if (world)
      throw Error("--nproc: this process is already rank " + std::to_string(world->rank) + " of " +
                  std::to_string(world->world) + " (WORLD_SIZE is set); launch it without --nproc");
    if (request.jobs > 1) throw Error("--nproc and --jobs cannot be combined: give the cores to one or the other");
    ResultsStore::require_sound(results);  // the ranks are supervised children: they leave it to this process
    return run_ranks(request, work.size(), [&](const std::string& variant, int64_t seed, const std::string& message) {
      record_unclaimed_crash(*plan.config_of(variant), registry, file.path(), variant, seed, message);
    });
  }
  if (world && request.jobs > 1) throw Error("--jobs cannot be used by a data-parallel rank (WORLD_SIZE is set)");
  if (!world || world->rank == 0) {  // runs whose process is gone are recorded killed; they resume below
    if (!supervised_child()) ResultsStore::require_sound(results);  // before this command's first write
    ResultsStore store(results);
    for (int64_t id : store.settle_stale())
      std::fprintf(stderr, "note: run %lld had lost its process; recorded as killed\n", static_cast<long long>(id));
  }
  // Every run in a supervised child of its own (htm run; a caller of this function that trains
  // in-process asks for --jobs 1 without `supervise`), unless this process is one, or a rank.
  if (!world && (request.supervise || (request.jobs > 1 && work.size() > 1)) && !supervised_child())
    return run_parallel(request, unfinished(request, work), logs,
                        [&](const std::string& variant, int64_t seed, const std::string& message) {
                          record_unclaimed_crash(*plan.config_of(variant), registry, file.path(), variant, seed,
                                                 message);
                        });

  // A rank an outside launcher started (torchrun, srun) supervises itself: it trains in a child
  // and records the child's crash in the run, as --nproc's launcher does for its ranks.
  if (world && request.supervise && !supervised_child())
    return run_outside_rank(request, world->rank, world->world, [&](const std::string& variant) {
      const ResolvedConfig* config = plan.config_of(variant);
      if (config == nullptr) throw Error("variant '" + variant + "' is not one of this study's");
      return std::make_pair(config->settings.experiment.name, config->settings.runtime.results);
    });
  std::unique_ptr<Communicator> comm = world ? rank_group(*world, work) : nullptr;
  int code = 0;
  for (const auto& run : work) {
    if (interrupt_requested() && !comm) return 130;
    switch (run_one(run, file.path(), request.rerun, request.ignore_memory, registry, tags_of(request),
                    request.verbosity, {}, comm.get())) {
      case Outcome::interrupted:
        return 130;
      case Outcome::held:
        code = 1;
        break;
      case Outcome::failed:
        if (comm) {  // a rank may be gone: the group cannot be trusted for the next run
          std::fprintf(stderr, "htm: a data-parallel run failed; the remaining runs are not started\n");
          return 1;
        }
        code = 1;
        break;
      default:
        break;
    }
  }
  return code;
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
  switch (run_one({variant, seed, config}, file.path(), false, false, registry, {}, 1, {run_id, force})) {
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
