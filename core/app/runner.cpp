#include "runner.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include <torch/torch.h>

#include "htm/adapter.h"
#include "htm/error.h"
#include "htm/merge.h"
#include "htm/policy.h"
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
    info.plugins.push_back({kind_name(kind), name, registry.entry(kind, name).manifest.version});
  };
  add(PluginKind::dataset, config.dataset.name);
  add(PluginKind::adapter, config.adapter.name);
  add(PluginKind::policy, config.policy.name);
  add(PluginKind::merge, config.merge.name);
  for (const auto& [name, choice] : config.losses) add(PluginKind::loss, name);
  return info;
}

// results/runs/<experiment>/<variant>-seed<S>-<time>-<pid>: unique without asking the database.
std::string artifact_dir(const ResolvedConfig& config, const std::string& variant, int64_t seed) {
  std::string name = variant + "-seed" + std::to_string(seed);
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return config.settings.runtime.artifacts + "/" + config.experiment + "/" + name + "-" + stamp +
         "-" + std::to_string(getpid());
}

enum class Outcome { finished, skipped, failed, interrupted };

Outcome run_one(const ExperimentFile& file, const std::string& variant, int64_t seed, bool force,
                const Registry& registry) {
  ResolvedConfig config = file.resolve(variant, registry);
  set_threads(config.settings.runtime.threads);
  const std::string label = config.experiment + "/" + variant + " seed " + std::to_string(seed);
  ResultsStore store(config.settings.runtime.results);
  if (!force && store.find_finished(config.experiment, variant, seed, config.hash)) {
    std::printf("[%s] already finished in %s; skipped (use --force to run again)\n", label.c_str(),
                store.path().c_str());
    return Outcome::skipped;
  }
  Experiment ex = assemble(config, registry, seed);

  RunInfo info = describe(config, registry, file.path(), seed);
  info.artifact_dir = artifact_dir(config, variant, seed);
  const int64_t run_id = store.begin_run(info);
  const std::string& artifacts = info.artifact_dir;
  try {
    Trainer trainer(ex, store, run_id, artifacts, seed, label);
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
                  static_cast<long long>(ex.participating), static_cast<long long>(s.steps),
                  s.seconds, s.images_per_s);
    const BaselineScores& r = s.reference;
    if (!std::isnan(r.pca_mse) && std::isnan(s.accuracy))
      std::printf("[%s] reference: PCA with the bottleneck's %lld floats %.5f (%.1f%% of the mean-image error)\n",
                  label.c_str(), static_cast<long long>(r.pca_components), r.pca_mse,
                  100.0 * r.pca_mse / r.mean_mse);
    if (!std::isnan(r.linear_accuracy) && !std::isnan(s.accuracy))
      std::printf("[%s] reference: a linear (ridge) classifier on the raw input %.4f\n", label.c_str(),
                  r.linear_accuracy);
    return Outcome::finished;
  } catch (const Interrupted&) {
    store.finish_run(run_id, RunStatus::interrupted, "interrupted by the user");
    std::fprintf(stderr, "\n[%s] run %lld interrupted; recorded as such\n", label.c_str(),
                 static_cast<long long>(run_id));
    return Outcome::interrupted;
  } catch (const std::exception& e) {
    store.finish_run(run_id, RunStatus::failed, e.what());
    std::fprintf(stderr, "\nerror: [%s] run %lld failed: %s\n", label.c_str(),
                 static_cast<long long>(run_id), e.what());
    return Outcome::failed;
  }
}

// --jobs N: each variant × seed in its own process, N at a time.
int run_parallel(const RunRequest& request, const std::vector<std::pair<std::string, int64_t>>& work) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  bool user_threads = false;
  for (const auto& o : request.overrides) user_threads |= o.rfind("runtime.threads", 0) == 0;
  size_t next = 0;
  int running = 0, worst = 0;
  auto reap = [&]() {
    int status = 0;
    if (wait(&status) > 0) {
      --running;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      worst = std::max(worst, code);
    }
  };
  while (next < work.size() || running > 0) {
    if (next < work.size() && running < request.jobs && !interrupt_requested()) {
      std::vector<std::string> args = {self, "run", request.file, "--variant", work[next].first,
                                       "--seed", std::to_string(work[next].second)};
      if (request.force) args.push_back("--force");
      for (const auto& o : request.overrides) args.insert(args.end(), {"--set", o});
      if (!user_threads)
        args.insert(args.end(), {"--set", "runtime.threads=" + std::to_string(std::max(1u, cores / request.jobs))});
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t pid;
      if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
        throw Error("cannot start a worker process for " + work[next].first);
      ++running;
      ++next;
    } else {
      reap();
      if (interrupt_requested() && next < work.size()) next = work.size();
    }
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
  ExperimentFile file = ExperimentFile::load(request.file, request.overrides);
  std::vector<std::string> variants = request.variants.empty() ? file.variants() : request.variants;
  std::vector<std::pair<std::string, int64_t>> work;
  for (const auto& variant : variants) {
    // Resolving every variant first reports any config error before a single run starts.
    ResolvedConfig config = file.resolve(variant, registry);
    auto seeds = request.seeds.empty() ? config.settings.experiment.seeds : request.seeds;
    for (int64_t seed : seeds) work.emplace_back(variant, seed);
  }
  if (request.jobs > 1 && work.size() > 1) return run_parallel(request, work);

  int code = 0;
  for (const auto& [variant, seed] : work) {
    switch (run_one(file, variant, seed, request.force, registry)) {
      case Outcome::interrupted: return 130;
      case Outcome::failed: code = 1; break;
      default: break;
    }
  }
  return code;
}

}  // namespace htm
