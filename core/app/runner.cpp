#include "runner.h"

#include "commands.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "htm/adapter.h"
#include "htm/error.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "htm/sets.h"
#include "model/plugin_scope.h"
#include "signals.h"
#include "store/results_store.h"

extern char** environ;

namespace htm {
namespace {

std::string shell_output(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

RunInfo describe(const ResolvedConfig& config, const Registry& registry, const std::string& file,
                 int64_t seed) {
  RunInfo info;
  info.experiment = config.experiment;
  info.source_file = file;
  info.variant = config.variant;
  info.seed = seed;
  info.config_toml = config.toml;
  info.config_hash = config.hash;
  info.git_revision = git_revision();
  info.torch_version = TORCH_VERSION;
  info.htm_version = HTM_VERSION;
  info.host = hostname();
  info.params = config.flattened();
  auto add = [&](PluginKind kind, const std::string& name) {
    const PluginEntry& entry = registry.entry(kind, name);
    info.plugins.push_back({kind_name(kind), name, entry.manifest.version, entry.path, registry.sha256(entry.path)});
  };
  add(PluginKind::dataset, config.dataset.name);
  add(PluginKind::adapter, config.adapter.name);
  add(PluginKind::policy, config.policy.name);
  add(PluginKind::merge, config.merge.name);
  for (const auto& [name, choice] : config.losses) add(PluginKind::loss, name);
  return info;
}

// "<variant>-seed<S>" as one safe path component: a variant's name may hold anything TOML allows.
std::string run_file_name(const std::string& variant, int64_t seed) {
  std::string name = variant + "-seed" + std::to_string(seed);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("-_.=,+").find(c) == std::string::npos) c = '_';
  if (name[0] == '.') name[0] = '_';
  return name;
}

// results/runs/<experiment>/<variant>-seed<S>-<time>-<pid>: unique without asking the database.
std::string artifact_dir(const ResolvedConfig& config, const std::string& variant, int64_t seed) {
  const std::string name = run_file_name(variant, seed);
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return config.settings.runtime.artifacts + "/" + config.experiment + "/" + name + "-" + stamp +
         "-" + std::to_string(getpid());
}

enum class Outcome { finished, skipped, failed, interrupted };

std::map<std::string, std::string> tags_of(const RunRequest& request) {
  std::map<std::string, std::string> tags;
  for (const auto& t : request.tags) tags.insert(key_value("--tag", t));
  if (!request.note.empty()) tags["note"] = request.note;
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

Outcome run_one(const ExperimentFile& file, const std::string& variant, int64_t seed, bool force,
                const Registry& registry, const std::map<std::string, std::string>& tags = {},
                int verbosity = 1, int64_t expected_run = 0) {
  ResolvedConfig config = file.resolve(variant, registry);
  set_threads(config.settings.runtime.threads);
  const std::string label = config.experiment + "/" + variant + " seed " + std::to_string(seed);
  ResultsStore store(config.settings.runtime.results);
  store.set_busy_timeout(kRunBusyTimeoutMs);
  if (!force && expected_run == 0) {  // the cheap answer first: no need to load data for a finished run
    if (auto done = store.find_finished(config.experiment, variant, seed, config.hash)) {
      std::printf("[%s] already finished as run %lld in %s; skipped (use --force to run again)\n", label.c_str(),
                  static_cast<long long>(*done), store.path().c_str());
      return Outcome::skipped;
    }
  }
  // Assembling builds the plugins and runs a first forward pass. A bad setting a plugin refuses
  // (htm::Error from its constructor) is bad input: nothing is recorded. An exception out of a
  // plugin's code is that plugin's fault: the run is recorded as failed with it.
  std::optional<Experiment> ex;
  std::string early_message, early_full;
  take_plugin_fault();
  try {
    ex = assemble(config, registry, seed);
  } catch (const std::exception& e) {
    const PluginFault fault = take_plugin_fault();
    if (fault.object == nullptr && dynamic_cast<const Error*>(&e) != nullptr) throw;
    early_message = one_line(e, &early_full);
    if (fault.object != nullptr) early_message = registry.describe(fault.object) + " failed: " + early_message;
  }

  RunInfo info = describe(config, registry, file.path(), seed);
  info.artifact_dir = artifact_dir(config, variant, seed);
  const Claim claim = store.claim_run(info, force);
  if (expected_run != 0 && claim.run_id != expected_run && claim.outcome != Claim::Outcome::finished)
    throw Error("run " + std::to_string(expected_run) + " is not the latest unfinished run of " + label +
                " (that is run " + std::to_string(claim.run_id) + ")");
  switch (claim.outcome) {
    case Claim::Outcome::finished:
      std::printf("[%s] already finished as run %lld in %s; skipped (use --force to run again)\n", label.c_str(),
                  static_cast<long long>(claim.run_id), store.path().c_str());
      return Outcome::skipped;
    case Claim::Outcome::taken:
      std::printf("[%s] run %lld is being trained by another process (%s); skipped\n", label.c_str(),
                  static_cast<long long>(claim.run_id), claim.detail.c_str());
      return Outcome::skipped;
    case Claim::Outcome::resumed:
      std::fprintf(stderr, "[%s] resuming run %lld (it was %s)\n", label.c_str(), static_cast<long long>(claim.run_id),
                   claim.detail.c_str());
      break;
    case Claim::Outcome::started: break;
  }
  const int64_t run_id = claim.run_id;
  const std::string artifacts = claim.artifact_dir;
  store.set_tags(run_id, tags);
  auto record_failure = [&](const std::string& message, const std::string& full) {
    std::error_code ec;
    std::filesystem::create_directories(artifacts, ec);
    if (FILE* log = std::fopen((artifacts + "/error.log").c_str(), "w")) {  // the backtrace, if any, is here
      std::fprintf(log, "%s\n\n%s\n", message.c_str(), full.c_str());
      std::fclose(log);
    }
    store.finish_run(run_id, RunStatus::failed, message);
    std::fprintf(stderr, "\nerror: [%s] run %lld failed: %s\n", label.c_str(), static_cast<long long>(run_id),
                 message.c_str());
    return Outcome::failed;
  };
  if (!ex) return record_failure(early_message, early_full);
  try {
    TrainerOptions options;
    options.resume = claim.outcome == Claim::Outcome::resumed;
    options.verbosity = verbosity;
    Trainer trainer(*ex, store, run_id, artifacts, seed, label, options);
    TrainSummary s = trainer.run();
    store.finish_run(run_id, RunStatus::finished);
    if (std::isnan(s.accuracy))
      std::printf("[%s] run %lld finished: test MSE %.5f vs mean-image baseline %.5f (%.1f%%), "
                  "%lld steps in %.1f s (%.1f img/s)\n",
                  label.c_str(), static_cast<long long>(run_id), s.test_mse, s.reference.mean_mse,
                  100.0 * s.test_mse / s.reference.mean_mse, static_cast<long long>(s.steps), s.seconds,
                  s.images_per_s);
    else
      std::printf("[%s] run %lld finished: test accuracy %.4f, %lld parameters, %lld steps in %.1f s "
                  "(%.1f img/s)\n",
                  label.c_str(), static_cast<long long>(run_id), s.accuracy,
                  static_cast<long long>(ex->participating), static_cast<long long>(s.steps),
                  s.seconds, s.images_per_s);
    const BaselineScores& r = s.reference;
    if (!std::isnan(r.pca_mse) && std::isnan(s.accuracy))
      std::printf("[%s] reference: PCA with the bottleneck's %lld floats %.5f (%.1f%% of the mean-image error)\n",
                  label.c_str(), static_cast<long long>(r.pca_components), r.pca_mse,
                  100.0 * r.pca_mse / r.mean_mse);
    if (!std::isnan(r.linear_accuracy) && !std::isnan(s.accuracy))
      std::printf("[%s] reference: a linear (ridge) classifier on the raw input %.4f\n", label.c_str(),
                  r.linear_accuracy);
    // Data with a true hierarchy: the scores that matter, beside the random-merge floor.
    const auto f1 = store.query("SELECT name, value FROM latest_metrics WHERE run_id = ? AND split = 'test' AND name IN "
                                "('cluster_f1', 'sibling_f1', 'random/cluster_f1', 'random/sibling_f1') ORDER BY name",
                                {run_id});
    std::map<std::string, std::string> scores;
    for (const auto& row : f1.rows) scores[row[0]] = row[1];
    if (scores.count("cluster_f1"))
      std::printf("[%s] hierarchy: cluster F1 %s (random merges %s), sibling F1 %s (random %s)\n", label.c_str(),
                  scores["cluster_f1"].c_str(), scores["random/cluster_f1"].c_str(), scores["sibling_f1"].c_str(),
                  scores["random/sibling_f1"].c_str());
    return Outcome::finished;
  } catch (const Interrupted&) {
    store.finish_run(run_id, RunStatus::interrupted, "interrupted by a signal; htm run resumes it");
    std::fprintf(stderr, "\n[%s] run %lld interrupted; recorded as such (running the same command resumes it)\n",
                 label.c_str(), static_cast<long long>(run_id));
    return Outcome::interrupted;
  } catch (const std::exception& e) {
    std::string full, message = one_line(e, &full);
    const PluginFault fault = take_plugin_fault();
    if (dynamic_cast<const NonFinite*>(&e) != nullptr) message = "training diverged: " + message;
    else if (fault.object != nullptr) message = registry.describe(fault.object) + " failed: " + message;
    return record_failure(message, full);
  }
}

// The last line of a worker's log that is a progress line ("... step S/T ... ETA ...").
std::string last_progress(const std::string& log) {
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  const std::streamoff size = in.tellg();
  if (size <= 0) return "starting";
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : tail)
    if (c == '\r') c = '\n';
  std::string best = "starting";
  std::istringstream lines(tail);
  for (std::string line; std::getline(lines, line);)
    if (line.find(" ETA ") != std::string::npos) best = line;
  return best;
}

// A finished worker's log without its progress lines: what a non-TTY run would have printed.
void print_outcome(const std::string& log) {
  std::ifstream in(log, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : text)
    if (c == '\r') c = '\n';
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.find(" ETA ") == std::string::npos) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// --jobs N: each variant × seed in its own process, N at a time. Workers get their own process
// group (a terminal's Ctrl-C reaches the parent alone, which forwards it once) and die with
// the parent (HTM_WORKER_OF: they ask the kernel for SIGTERM when it goes). On a terminal the
// workers write to log files under `logs` and the parent keeps one live line per running job.
int run_parallel(const RunRequest& request, const std::vector<std::pair<std::string, int64_t>>& work,
                 const std::string& logs) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const bool live = isatty(fileno(stderr)) && request.verbosity >= 1;
  if (live) std::filesystem::create_directories(logs);
  bool user_threads = false;
  for (const auto& o : request.overrides) user_threads |= o.rfind("runtime.threads", 0) == 0;
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string(*e).rfind("HTM_WORKER_OF=", 0) != 0) environment.push_back(*e);
  environment.push_back("HTM_WORKER_OF=" + std::to_string(getpid()));
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  struct Attr {
    posix_spawnattr_t* attr;
    ~Attr() { posix_spawnattr_destroy(attr); }
  } attr_owner{&attr};

  struct Job {
    std::string label, log;
  };
  std::map<pid_t, Job> jobs;
  size_t next = 0, done = 0;
  int worst = 0, drawn = 0;
  auto erase_block = [&] {
    for (; drawn > 0; --drawn) std::fprintf(stderr, "\x1b[1A\x1b[2K");
  };
  auto draw_block = [&] {
    std::fprintf(stderr, "jobs: %zu done, %zu running, %zu left\n", done, jobs.size(), work.size() - next);
    for (const auto& [pid, job] : jobs) std::fprintf(stderr, "  %.150s\n", last_progress(job.log).c_str());
    drawn = 1 + static_cast<int>(jobs.size());
    std::fflush(stderr);
  };
  auto finished = [&](pid_t pid, int status) {
    auto found = jobs.find(pid);
    if (found == jobs.end()) return;
    forget_worker(pid);
    if (live) {
      erase_block();
      print_outcome(found->second.log);
    }
    jobs.erase(found);
    ++done;
    worst = std::max(worst, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  };
  while ((next < work.size() && !interrupt_requested()) || !jobs.empty()) {
    if (next < work.size() && static_cast<int>(jobs.size()) < request.jobs && !interrupt_requested()) {
      const auto& [variant, seed] = work[next];
      std::vector<std::string> args = {self, "run", request.file, "--variant", variant, "--seed", std::to_string(seed)};
      if (request.force) args.push_back("--force");
      if (request.verbosity == 0) args.push_back("--quiet");
      if (request.verbosity == 2) args.push_back("--verbose");
      for (const auto& t : request.tags) args.insert(args.end(), {"--tag", t});
      if (!request.note.empty()) args.insert(args.end(), {"--note", request.note});
      for (const auto& o : request.overrides) args.insert(args.end(), {"--set", o});
      for (const auto& w : request.sweeps) args.insert(args.end(), {"--sweep", w});
      if (!user_threads)
        args.insert(args.end(), {"--set", "runtime.threads=" + std::to_string(std::max(1u, cores / request.jobs))});
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      Job job{variant + " seed " + std::to_string(seed), ""};
      posix_spawn_file_actions_t files;
      posix_spawn_file_actions_init(&files);
      if (live) {
        job.log = logs + "/" + run_file_name(variant, seed) + ".log";
        posix_spawn_file_actions_addopen(&files, 1, job.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&files, 1, 2);
      }
      pid_t pid;
      const int rc = posix_spawn(&pid, self.c_str(), &files, &attr, argv.data(), envp.data());
      posix_spawn_file_actions_destroy(&files);
      if (rc != 0) throw Error("cannot start a worker process for " + variant);
      remember_worker(pid);
      jobs[pid] = job;
      ++next;
      continue;
    }
    int status = 0;
    if (!live) {  // a plain log: block until a worker ends
      const pid_t pid = wait(&status);
      if (pid > 0) finished(pid, status);
      else if (errno == ECHILD) jobs.clear();
      continue;
    }
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      finished(pid, status);
      continue;
    }
    erase_block();
    draw_block();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (live) erase_block();
  if (interrupt_requested()) {
    for (size_t i = next; i < work.size(); ++i)
      std::fprintf(stderr, "[%s seed %lld] not started (interrupted before its turn)\n", work[i].first.c_str(),
                   static_cast<long long>(work[i].second));
    return 130;
  }
  return worst;
}

}  // namespace

std::string git_revision() {
  const std::string dir = HTM_SOURCE_DIR;
  std::string rev = shell_output("git -C '" + dir + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (rev.empty()) return "unknown";
  if (!shell_output("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null").empty())
    rev += "-dirty";
  return rev;
}

int run_experiment(const RunRequest& request, const Registry& registry) {
  for (const auto& warning : registry.warnings()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  ExperimentFile file = ExperimentFile::load(request.file, request.overrides);
  for (const auto& sweep : request.sweeps) file.add_sweep(sweep);
  std::vector<std::string> variants = request.variants.empty() ? file.variants() : request.variants;
  std::vector<std::pair<std::string, int64_t>> work;
  std::string results, logs;
  for (const auto& variant : variants) {
    // Resolving every variant first reports any config error before a single run starts.
    ResolvedConfig config = file.resolve(variant, registry);
    results = config.settings.runtime.results;
    logs = config.settings.runtime.artifacts + "/" + config.experiment + "/logs";
    auto seeds = request.seeds.empty() ? config.settings.experiment.seeds : request.seeds;
    for (int64_t seed : seeds)
      if (std::find(work.begin(), work.end(), std::make_pair(variant, seed)) == work.end())  // repeats collapse
        work.emplace_back(variant, seed);
  }
  {  // runs whose process is gone are recorded killed; they resume below when asked for again
    ResultsStore store(results);
    for (int64_t id : store.settle_stale())
      std::fprintf(stderr, "note: run %lld had lost its process; recorded as killed\n", static_cast<long long>(id));
  }
  if (request.jobs > 1 && work.size() > 1) return run_parallel(request, work, logs);

  int code = 0;
  for (const auto& [variant, seed] : work) {
    if (interrupt_requested()) return 130;
    switch (run_one(file, variant, seed, request.force, registry, tags_of(request), request.verbosity)) {
      case Outcome::interrupted: return 130;
      case Outcome::failed: code = 1; break;
      default: break;
    }
  }
  return code;
}

int resume_run(int64_t run_id, const std::string& db, const std::vector<std::string>& overrides,
               const std::vector<std::string>& sweeps, const Registry& registry) {
  std::string source, variant;
  int64_t seed = 0;
  std::string hash;
  {
    ResultsStore store(db);
    store.settle_stale();
    auto row = store.query("SELECT source_file, variant, seed, config_hash, status FROM runs WHERE id = ?", {run_id});
    if (row.rows.empty()) throw Error("results database '" + db + "' has no run " + std::to_string(run_id));
    const auto& r = row.rows[0];
    if (r[4] == "finished") throw Error("run " + std::to_string(run_id) + " has finished: nothing to resume");
    if (r[4] == "failed")
      throw Error("run " + std::to_string(run_id) + " failed; a failed run is not resumed (htm run starts it again)");
    if (r[4] == "running") throw Error("run " + std::to_string(run_id) + " is still running under its process");
    source = r[0], variant = r[1], seed = std::atoll(r[2].c_str()), hash = r[3];
  }
  std::vector<std::string> settings = overrides;
  settings.push_back("runtime.results=" + to_toml(Value(db)));  // the database it is recorded in
  ExperimentFile file = ExperimentFile::load(source, settings);
  for (const auto& sweep : sweeps) file.add_sweep(sweep);
  const ResolvedConfig config = file.resolve(variant, registry);
  if (config.hash != hash)
    throw Error("'" + source + "' now resolves to another config for variant '" + variant + "' (hash " + config.hash +
                "; run " + std::to_string(run_id) + " has " + hash +
                "): give the --set options it was started with, or restore the file");
  switch (run_one(file, variant, seed, false, registry, {}, 1, run_id)) {
    case Outcome::interrupted: return 130;
    case Outcome::failed: return 1;
    default: return 0;
  }
}

}  // namespace htm
