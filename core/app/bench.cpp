// `htm bench`: a training step of the paper's model (T=256, C=256, L=8, h=8 by default) and
// the pair sampler alone, timed as medians, with peak memory and thread count.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <boost/program_options.hpp>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "commands.h"
#include "htm/adapter.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "model.h"
#include "optimizer.h"
#include "registry.h"
#include "runner.h"

namespace po = boost::program_options;

namespace htm {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class F>
std::vector<double> time_ms(int repeats, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

// One warm-up call of `step`, one profiled into `profile` (if named), then `steps` timed calls.
template <class F>
std::vector<double> time_steps(F&& step, int64_t steps, const std::string& profile) {
  step();
  if (!profile.empty()) {
    torch::autograd::profiler::RecordProfile guard(profile);
    step();
  }
  return time_ms(static_cast<int>(steps), step);
}

// Peak resident memory of this process so far (VmHWM), in MiB.
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

int64_t tokens_of(Experiment& ex) {
  auto* htm_model = dynamic_cast<HtmModelImpl*>(ex.model.get());
  return htm_model != nullptr ? htm_model->num_tokens() : 0;
}

// One training step of an experiment's model at the full schedule on its own data and batch
// size: forward, its losses and the estimator's surrogate, backward, AdamW.
int bench_config(const std::string& file_path, std::string variant, const std::vector<std::string>& overrides,
                 int64_t steps, const std::string& profile) {
  Registry registry;
  ExperimentFile file = ExperimentFile::load(file_path, overrides);
  if (variant.empty()) variant = file.variants().front();
  Experiment ex = assemble(file.resolve(variant, registry), registry, 0);
  const int64_t batch = ex.config.integer("train.batch_size");
  Batch data = ex.dataset->get(Split::train, torch::arange(std::min(batch, ex.dataset->size(Split::train))));
  FusedAdamW optimizer(ex.model->parameters(), 1e-4, 0.01);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  ex.model->train();
  auto step = [&] {
    auto out = ex.model->forward(data.input, ex.schedule, gen);
    auto per_sample = training_objective(ex.losses, out, data, 0, 0, true, false);
    auto total = surrogate_objective(per_sample, out.log_prob, Estimator{});
    optimizer.zero_grad();
    total.backward();
    optimizer.step();
  };
  auto ms = time_steps(step, steps, profile);
  const double med = median(ms);
  std::printf("train    %s/%s  B=%lld tokens=%lld C=%lld layers=%zu  step: median %.1f ms (min %.1f, max %.1f "
              "over %lld)  %.1f images/s\n",
              ex.config.experiment.c_str(), variant.c_str(), (long long)data.input.size(0),
              (long long)tokens_of(ex), (long long)ex.config.integer("model.dim"),
              ex.schedule.size(), med, *std::min_element(ms.begin(), ms.end()),
              *std::max_element(ms.begin(), ms.end()), (long long)steps, data.input.size(0) * 1000.0 / med);
  std::printf("threads  %d   peak memory (VmHWM) %.0f MiB\n", at::get_num_threads(), peak_rss_mib());
  return 0;
}

}  // namespace

int cmd_bench(const Args& args) {
  po::options_description opts("options");
  int64_t threads = 1, steps = 5, batch = 8, dim = 256, heads = 8, image = 32, patch = 2, r = 128;
  std::string policy_name, profile, config_file, variant;
  std::vector<std::string> overrides;
  opts.add_options()
      ("threads", po::value(&threads)->default_value(1), "torch threads (0 = all cores)")
      ("steps", po::value(&steps)->default_value(5), "timed training steps (after one warm-up)")
      ("batch", po::value(&batch)->default_value(8), "batch size")
      ("dim", po::value(&dim)->default_value(256), "token width C")
      ("heads", po::value(&heads)->default_value(8), "attention heads")
      ("image", po::value(&image)->default_value(32), "image side (3 channels); T = (image/patch)^2")
      ("patch", po::value(&patch)->default_value(2), "patch side")
      ("policy", po::value(&policy_name)->default_value("learned"), "policy plugin")
      ("pairs", po::value(&r)->default_value(128), "pairs r for the sampler benchmark")
      ("dropout", po::value<double>()->default_value(0.1), "dropout rate")
      ("profile", po::value(&profile), "write a chrome://tracing profile of one step to this file")
      ("config", po::value(&config_file),
       "time a training step of this experiment file's own model, data and batch size instead")
      ("variant", po::value(&variant), "with --config: the variant (default: the first)")
      ("set", po::value(&overrides)->composing(), "with --config: override a setting, e.g. --set train.batch_size=32");
  opts.add_options()("help,h", "show this help");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  if (vm.count("help")) {
    std::printf("usage: htm bench [options]\n\n");
    std::cout << opts;
    return 0;
  }
  po::notify(vm);
  set_threads(threads);
  torch::manual_seed(0);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  if (!config_file.empty()) return bench_config(config_file, variant, overrides, steps, profile);

  // ---- the pair sampler alone: B×T×T logits, r pairs
  const int64_t T = (image / patch) * (image / patch);
  auto logits = torch::randn({batch, T, T});
  auto fast = time_ms(20, [&] { sample_disjoint_pairs(logits, r, gen); });
  auto slow = time_ms(2, [&] { sample_disjoint_pairs_sequential(logits, r, gen); });
  std::printf("sampler  B=%lld T=%lld r=%lld  gumbel-sort-scan: median %.2f ms   "
              "one-pair-at-a-time: median %.1f ms   (%.0fx)\n",
              (long long)batch, (long long)T, (long long)r, median(fast), median(slow),
              median(slow) / median(fast));

  // ---- one training step of the full model at the full schedule
  Registry registry;
  BuildContext ctx;
  ctx.dim = dim;
  ctx.heads = heads;
  ctx.dropout = vm["dropout"].as<double>();
  ctx.sample_shape = {3, image, image};
  Params adapter_params = registry.default_params(PluginKind::adapter, "image");
  adapter_params.set("patch", patch);
  auto adapter = registry.create<Adapter>(PluginKind::adapter, "image", adapter_params, ctx);
  auto policy = registry.create<Policy>(PluginKind::policy, policy_name,
                                        registry.default_params(PluginKind::policy, policy_name), ctx);
  auto merge = registry.create<MergeOperator>(PluginKind::merge, "mlp",
                                              registry.default_params(PluginKind::merge, "mlp"), ctx);
  ModelOptions options;
  options.dim = dim;
  options.heads = heads;
  options.dropout = ctx.dropout;
  HtmModel model(options, adapter, policy, merge);
  const auto schedule = make_schedule(T, 1.0, 64);
  std::vector<int64_t> used;
  for (int64_t s : schedule)
    if (s > 0) used.push_back(s);
  FusedAdamW optimizer(model->parameters(), 1e-4, 0.01);
  auto input = torch::rand({batch, 3, image, image}) * 2 - 1;
  int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();

  auto step = [&] {
    torch::Tensor total;
    {
      RECORD_FUNCTION("htm::forward", {});
      auto out = model->forward(input, used, gen);
      auto loss = (out.output - input).pow(2).mean();
      total = loss + loss.detach() * out.log_prob.sum();
    }
    optimizer.zero_grad();
    {
      RECORD_FUNCTION("htm::backward", {});
      total.backward();
    }
    RECORD_FUNCTION("htm::optimizer", {});
    optimizer.step();
  };
  auto ms = time_steps(step, steps, profile);
  const double med = median(ms);
  std::printf("train    B=%lld T=%lld C=%lld L=%zu h=%lld params=%.2fM  step: median %.0f ms "
              "(min %.0f, max %.0f over %lld)  %.2f images/s\n",
              (long long)batch, (long long)T, (long long)dim, used.size(), (long long)heads,
              params / 1e6, med, *std::min_element(ms.begin(), ms.end()),
              *std::max_element(ms.begin(), ms.end()), (long long)steps, batch * 1000.0 / med);
  std::printf("threads  %d   peak memory (VmHWM) %.0f MiB\n", at::get_num_threads(), peak_rss_mib());
  return 0;
}

}  // namespace htm
