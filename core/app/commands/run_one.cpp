// One planned run of a study (commands/run_one.h): claimed, assembled, trained and recorded.
#include "commands/run_one.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "board/run_board.h"
#include "commands/run_lines.h"
#include "commands/run_record.h"
#include "dist/communicator.h"
#include "htm/error.h"
#include "htm/sets.h"
#include "process/launch.h"
#include "process/signals.h"
#include "process/supervise.h"
#include "store/results_store.h"
#include "train/experiment.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace htm {
namespace {

constexpr int kRunBusyTimeoutMs = 10 * 60 * 1000;  // a run waits up to 10 minutes for an outside lock

}  // namespace

std::string one_line(const std::exception& e, std::string* full) {
  std::string text = e.what();
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) text = c10->what_without_backtrace();
  *full = e.what();
  const size_t newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline) + " (more in error.log)";
}

bool apply_runtime(const RuntimeSettings& runtime, const Communicator* comm) {
  int64_t threads = runtime.threads;
  if (threads == 0 && comm != nullptr) threads = std::max<int64_t>(1, usable_cores() / comm->info().local_world);
  board_stall_timeout(runtime.stall_timeout);  // the supervisor's watchdog reads it
  set_stop_grace(static_cast<int>(runtime.stop_grace));
  return use_runtime(runtime, threads) != runtime.precision;
}

namespace {

// Data-parallel: what rank 0 decided for a run, sent to every rank (one broadcast per run).
enum Decision : int64_t { kSkip = 0, kStart = 1, kResume = 2 };
int64_t share_decision(Communicator* comm, int64_t decision) {
  if (comm == nullptr) return decision;
  auto t = torch::tensor({decision}, torch::kLong);
  comm->broadcast(t);
  return t.item<int64_t>();
}

}  // namespace

Outcome follow_run(const PlannedRun& planned, const RunContext& context) {
  Communicator& comm = *context.comm;
  const Registry& registry = *context.registry;
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
  const int64_t run_id = scratch.begin_run(describe(config, registry, context.file, seed));
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

namespace {

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
Outcome train_claimed(Experiment& ex, ResultsStore& store, const Claim& claim, const PlannedRun& planned,
                      const RunContext& context, const std::optional<MemoryEstimate>& memory) {
  const std::string label = planned.label();
  const int64_t seed = planned.seed;
  const int verbosity = context.verbosity;
  Communicator* comm = context.comm;
  try {
    TrainerOptions options;
    options.resume = claim.outcome == Claim::Outcome::resumed;
    options.verbosity = verbosity;
    options.comm = comm;
    Trainer trainer(ex, store, claim.run_id, claim.artifact_dir, seed, label, options);
    const TrainSummary s = trainer.run();
    store.finish_run(claim.run_id, RunStatus::finished);
    print_finished(store, {claim.run_id, label, s, ex.participating, memory}, verbosity);
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
      message = context.registry->describe(fault.object) + " failed: " + message;
    return record_failure(store, claim, label, message, full);
  }
}

}  // namespace

Outcome run_one(const PlannedRun& planned, const RunContext& context) {
  Communicator* comm = context.comm;
  if (comm != nullptr && comm->rank() != 0) return follow_run(planned, context);
  const Registry& registry = *context.registry;
  const bool rerun = context.rerun, ignore_memory = context.ignore_memory;
  const int64_t expected_run = context.expected_run;
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
    if (auto refused = refused_allocation(e, label, available_memory())) {  // bad input too, whoever allocated
      share_decision(comm, kSkip);
      throw *refused;
    }
    if (fault.object == nullptr && dynamic_cast<const Error*>(&e) != nullptr) {
      share_decision(comm, kSkip);  // the other ranks stop waiting for this run
      throw;
    }
    early_message = one_line(e, &early_full);
    if (fault.object != nullptr) early_message = registry.describe(fault.object) + " failed: " + early_message;
  }
  std::optional<MemoryEstimate> memory;
  if (ex && comm == nullptr) memory = check_memory(*ex, label, ignore_memory);

  RunInfo info = describe(config, registry, context.file, seed);
  info.artifact_dir = artifact_dir(config, variant, seed);
  const Claim claim = store.claim_run(info, rerun, context.retry_crashed);
  if (expected_run != 0 && claim.run_id != expected_run && claim.outcome != Claim::Outcome::finished)
    throw Error("run " + std::to_string(expected_run) + " is not the latest unfinished run of " + label +
                " (that is run " + std::to_string(claim.run_id) + ")");
  const bool train = ex && (claim.outcome == Claim::Outcome::started || claim.outcome == Claim::Outcome::resumed);
  if (train || claim.outcome == Claim::Outcome::held) board_run(claim.run_id, store.path(), label);
  share_decision(comm, !train ? kSkip : claim.outcome == Claim::Outcome::resumed ? kResume : kStart);
  if (const auto said = say_claim(claim, label, store.path())) return *said;
  std::map<std::string, std::string> run_tags = context.tags;
  if (bf16_fell_back) run_tags["precision"] = "fp32: bf16 asked, no bf16 instructions";
  store.set_tags(claim.run_id, run_tags);
  if (!ex) return record_failure(store, claim, label, early_message, early_full);
  return train_claimed(*ex, store, claim, planned, context, memory);
}

}  // namespace htm
