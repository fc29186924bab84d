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
#include "results_store.h"
#include "vit.h"

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
  return config.text("runtime.artifacts") + "/" + config.experiment + "/" + name + "-" + stamp +
         "-" + std::to_string(getpid());
}

enum class Outcome { finished, skipped, failed, interrupted };

Outcome run_one(const ExperimentFile& file, const std::string& variant, int64_t seed, bool force,
                const Registry& registry) {
  ResolvedConfig config = file.resolve(variant, registry);
  set_threads(config.integer("runtime.threads"));
  const std::string label = config.experiment + "/" + variant + " seed " + std::to_string(seed);
  ResultsStore store(config.text("runtime.results"));
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

void set_threads(int64_t threads) {
  const int64_t n = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(n));
}

std::string git_revision() {
  const std::string dir = HTM_SOURCE_DIR;
  std::string rev = shell_output("git -C '" + dir + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (rev.empty()) return "unknown";
  if (!shell_output("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null").empty())
    rev += "-dirty";
  return rev;
}

namespace {

ModelOptions model_options(const ResolvedConfig& config, const BuildContext& ctx) {
  ModelOptions options;
  options.dim = ctx.dim;
  options.heads = ctx.heads;
  options.mlp_ratio = ctx.mlp_ratio;
  options.dropout = ctx.dropout;
  options.transformer = config.flag("model.transformer");
  options.cross_attention = config.flag("model.cross_attention");
  options.prob_scale = config.text("estimator.method") == "prob_scale";
  if (config.text("model.task") == "classify") options.classes = ctx.num_classes;
  options.leaf_classifier = config.flag("model.leaf_classifier");
  options.timestep_scale = config.number("model.timestep_scale");
  return options;
}

// The HTM model of `config` at width ctx.dim, with its schedule.
std::shared_ptr<HtmModelImpl> build_htm(const ResolvedConfig& config, const Registry& registry,
                                        const BuildContext& ctx, std::vector<int64_t>& schedule) {
  auto adapter = registry.create<Adapter>(PluginKind::adapter, config.adapter.name, config.adapter.params, ctx);
  auto policy = registry.create<Policy>(PluginKind::policy, config.policy.name, config.policy.params, ctx);
  auto merge = registry.create<MergeOperator>(PluginKind::merge, config.merge.name, config.merge.params, ctx);
  const int64_t tokens = adapter->num_tokens();
  schedule = config.integers("model.schedule");
  if (schedule.empty())
    schedule = make_schedule(tokens, config.number("model.merge_fraction"), config.integer("model.layers"));
  check_schedule(tokens, schedule);
  ModelOptions options = model_options(config, ctx);
  const std::string& policy_name = config.policy.name;
  if (policy->needs_attention() && !options.transformer)
    throw Error("policy '" + policy_name + "' reads the encoder transformer block's attention; "
                "set model.transformer = true");
  if (policy->needs_cross_keys() && !options.cross_attention)
    throw Error("policy '" + policy_name + "' reads the merging block's cross-attention keys; "
                "set model.cross_attention = true");
  return std::make_shared<HtmModelImpl>(options, adapter, policy, merge);
}

std::shared_ptr<VitImpl> build_vit(const ResolvedConfig& config, const Registry& registry, BuildContext ctx,
                                   int64_t dim) {
  ctx.dim = dim;
  VitOptions options;
  options.block = model_options(config, ctx);
  options.layers = config.integer("model.layers");
  options.classes = ctx.num_classes;
  auto adapter = registry.create<Adapter>(PluginKind::adapter, config.adapter.name, config.adapter.params, ctx);
  return std::make_shared<VitImpl>(options, adapter);
}

// §4.1 sizes the ViT to the HTM classifier's parameter count: the width (a multiple of 2·heads)
// whose count of participating parameters is closest.
int64_t matching_vit_dim(const ResolvedConfig& config, const Registry& registry, const BuildContext& ctx,
                         const torch::Tensor& probe) {
  std::vector<int64_t> schedule;
  const int64_t target = participating_parameters(*build_htm(config, registry, ctx, schedule), probe, schedule);
  const int64_t step = 2 * ctx.heads;
  auto count = [&](int64_t dim) {
    return participating_parameters(*build_vit(config, registry, ctx, dim), probe, {});
  };
  int64_t lo = 1, hi = 1;  // in units of step; counts grow with the width
  while (count(hi * step) < target) hi *= 2;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (count(mid * step) < target ? lo : hi) = mid;
  }
  return std::llabs(count(lo * step) - target) <= std::llabs(count(hi * step) - target) ? lo * step : hi * step;
}

}  // namespace

Experiment assemble(const ResolvedConfig& config, const Registry& registry, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  Experiment ex;
  ex.config = config;
  BuildContext ctx;
  ctx.dim = config.integer("model.dim");
  ctx.heads = config.integer("model.heads");
  ctx.mlp_ratio = config.integer("model.mlp_ratio");
  ctx.dropout = config.number("model.dropout");
  ex.dataset = registry.create<Dataset>(PluginKind::dataset, config.dataset.name,
                                        config.dataset.params, ctx);
  ctx.sample_shape = ex.dataset->sample_shape();
  ctx.num_classes = ex.dataset->num_classes();

  const bool classify = config.text("model.task") == "classify";
  const bool vit = config.text("model.architecture") == "vit";
  if (classify && ctx.num_classes < 2)
    throw Error("model.task = \"classify\" needs a dataset with classes; '" + config.dataset.name + "' has none");
  if (vit && !classify) throw Error("model.architecture = \"vit\" is a classifier: set model.task = \"classify\"");
  auto probe = ex.dataset->get(Split::train, torch::arange(std::min<int64_t>(2, ex.dataset->size(Split::train)))).input;
  if (vit) {
    int64_t dim = config.integer("model.vit_dim");
    if (dim == 0) dim = matching_vit_dim(config, registry, ctx, probe);
    if (dim % ctx.heads != 0)
      throw Error("model.vit_dim (" + std::to_string(dim) + ") must be a multiple of model.heads");
    torch::manual_seed(static_cast<uint64_t>(seed));  // the search drew weights; start again
    ex.model = build_vit(config, registry, ctx, dim);
    ex.schedule = {};
  } else {
    auto htm_model = build_htm(config, registry, ctx, ex.schedule);
    if (!classify) ex.latent_floats = tokens_after(htm_model->num_tokens(), ex.schedule, ex.schedule.size()) * ctx.dim;
    ex.model = htm_model;
  }
  for (const auto& [name, choice] : config.losses) {
    auto loss = registry.create<Loss>(PluginKind::loss, name, choice.params, ctx);
    ex.model->register_module("loss_" + name, loss);  // learnable loss parts train too
    ex.losses.push_back({name, choice.params.number("weight"), loss});
  }
  ex.parameters = count_parameters(*ex.model);
  ex.participating = participating_parameters(*ex.model, probe, ex.schedule);
  return ex;
}

int run_experiment(const RunRequest& request, const Registry& registry) {
  ExperimentFile file = ExperimentFile::load(request.file, request.overrides);
  std::vector<std::string> variants = request.variants.empty() ? file.variants() : request.variants;
  std::vector<std::pair<std::string, int64_t>> work;
  for (const auto& variant : variants) {
    // Resolving every variant first reports any config error before a single run starts.
    ResolvedConfig config = file.resolve(variant, registry);
    auto seeds = request.seeds.empty() ? config.integers("experiment.seeds") : request.seeds;
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
