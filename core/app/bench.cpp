// `htm bench`: a training step of an experiment file's model (default: the paper's size, T=256,
// C=256, L=8, h=8, experiments/bench/paper_size.toml) and the pair sampler alone at its shape,
// timed as medians, with peak memory and thread count.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <boost/program_options.hpp>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "commands.h"
#include "htm/error.h"
#include "htm/policy.h"
#include "model/model.h"
#include "registry.h"
#include "train/estimator.h"
#include "train/experiment.h"
#include "train/optimizer.h"
#include "train/trainer.h"

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

}  // namespace

int cmd_bench(const Args& args) {
  po::options_description opts("options");
  int64_t threads = 1, steps = 5;
  std::string profile, config_file, variant;
  std::vector<std::string> overrides;
  opts.add_options()
      ("threads", po::value(&threads)->default_value(1), "torch threads (0 = all cores)")
      ("steps", po::value(&steps)->default_value(5), "timed training steps (after one warm-up)")
      ("config", po::value(&config_file)->default_value("bench/paper_size.toml"),
       "experiment file whose model, data and batch size are timed (default: the paper's size)")
      ("variant", po::value(&variant), "the variant (default: the first)")
      ("set", po::value(&overrides)->composing(),
       "override a setting, e.g. --set train.batch_size=32 --set policy.plugin=random")
      ("profile", po::value(&profile), "write a chrome://tracing profile of one step to this file");
  po::variables_map vm;
  if (!parse_options("bench", args, opts, {}, vm, "[options]")) return 0;

  Registry registry;
  ExperimentFile file = ExperimentFile::load(config_file, overrides);
  if (variant.empty()) variant = file.variants().front();
  Experiment ex = assemble(file.resolve(variant, registry), registry, 0);
  set_threads(threads);  // after assembly: the file's runtime.threads is not what is timed
  const int64_t batch = std::min(ex.config.settings.train.batch_size, ex.dataset->size(Split::train));
  Batch data = ex.dataset->get(Split::train, torch::arange(batch));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto* htm_model = dynamic_cast<HtmModelImpl*>(ex.model.get());
  const int64_t T = htm_model != nullptr ? htm_model->num_tokens() : 0;

  // ---- the pair sampler alone: B×T×T logits, the first layer's r pairs
  if (T >= 2) {
    const int64_t r = ex.schedule.empty() ? T / 2 : std::max<int64_t>(1, ex.schedule.front());
    auto logits = torch::randn({batch, T, T});
    auto fast = time_ms(20, [&] { sample_disjoint_pairs(logits, r, gen); });
    auto slow = time_ms(2, [&] { sample_disjoint_pairs_sequential(logits, r, gen); });
    std::printf("sampler  B=%lld T=%lld r=%lld  gumbel-sort-scan: median %.2f ms   "
                "one-pair-at-a-time: median %.1f ms   (%.0fx)\n",
                (long long)batch, (long long)T, (long long)r, median(fast), median(slow),
                median(slow) / median(fast));
    // The log-probabilities of that draw, forward and backward, in each form (issue 12: the
    // exact form must not undo the sampler's speed).
    auto [src, dst] = sample_disjoint_pairs(logits, r, gen);
    auto leaf = logits.clone().requires_grad_(true);
    auto log_prob_ms = [&](LogProbForm form) {
      return time_ms(20, [&] {
        pair_log_prob(leaf, src, dst, form).sum().backward();
        leaf.mutable_grad() = torch::Tensor();
      });
    };
    auto exact = log_prob_ms(LogProbForm::exact), paper = log_prob_ms(LogProbForm::paper);
    std::printf("log-prob of the r pairs, forward + backward: exact median %.2f ms   paper median %.2f ms\n",
                median(exact), median(paper));
  }

  // ---- one training step at the full schedule: forward, the losses and the estimator's
  // surrogate, backward, AdamW
  const TrainSettings& train = ex.config.settings.train;
  FusedAdamW optimizer(ex.model->parameters(), train.lr, train.weight_decay);
  Estimator estimator(ex.config.settings.estimator);
  ex.model->train();
  auto step = [&] {
    torch::Tensor total;
    {
      RECORD_FUNCTION("htm::forward", {});
      ForwardHooks truth;
      truth.tree = data.tree;
      auto out = ex.model->forward(data.input, ex.schedule, gen, &truth);
      auto per_sample = training_objective(ex.losses, out, data, 0, 0, true, false);
      total = estimator.objective(per_sample, out.log_prob, out.entropy);
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
  std::printf("train    %s/%s  B=%lld T=%lld C=%lld L=%zu h=%lld params=%.2fM  step: median %.1f ms "
              "(min %.1f, max %.1f over %lld)  %.1f images/s\n",
              ex.config.experiment.c_str(), variant.c_str(), (long long)batch, (long long)T,
              (long long)ex.config.settings.model.dim, ex.schedule.size(), (long long)ex.config.settings.model.heads,
              ex.parameters / 1e6, med, *std::min_element(ms.begin(), ms.end()),
              *std::max_element(ms.begin(), ms.end()), (long long)steps, batch * 1000.0 / med);
  std::printf("threads  %d   peak memory (VmHWM) %.0f MiB\n", at::get_num_threads(), peak_rss_mib());
  return 0;
}

}  // namespace htm
