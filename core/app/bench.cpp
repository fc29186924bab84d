// `htm bench`: a training step of an experiment file's model (default: the paper's size, T=256,
// C=256, L=8, h=8, experiments/bench/paper_size.toml) and the pair sampler alone at its shape,
// timed as medians, with peak memory and thread count.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <boost/program_options.hpp>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "commands.h"
#include "dist/communicator.h"
#include "dist/grad_reducer.h"
#include "file_checks.h"
#include "htm/error.h"
#include "htm/policy.h"
#include "htm/row_shard.h"
#include "launch.h"
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
  int nproc = 1;
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
      ("profile", po::value(&profile), "write a chrome://tracing profile of one step to this file")
      ("nproc", po::value(&nproc)->default_value(1),
       "also time the step data-parallel: N processes of one thread, each a slice of the same batch");
  po::variables_map vm;
  if (!parse_options("bench", args, opts, {}, vm, "[options]")) return 0;
  if (nproc < 1) throw Error("--nproc " + std::to_string(nproc) + ": must be at least 1");
  const std::optional<WorldInfo> world = world_from_environment();
  if (world) {  // a rank of `--nproc`: the training step alone, on this rank's rows
    threads = 1;
    nproc = 1;
  }

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
  if (T >= 2 && !world) {
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
  // surrogate, backward (data-parallel: gradients summed as they come), AdamW
  const TrainSettings& train = ex.config.settings.train;
  FusedAdamW optimizer(ex.model->parameters(), train.lr, train.weight_decay);
  Estimator estimator(ex.config.settings.estimator);
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<GradientReducer> reducer;
  RowShard shard;
  if (world) {
    comm = std::make_unique<Communicator>(*world, "bench " + ex.config.hash, std::chrono::seconds(300));
    reducer = std::make_unique<GradientReducer>(ex.model->parameters(), *comm);
    const auto [first, rows] = rows_of_rank(batch, world->rank, world->world);
    shard = {first, rows, batch};
    data.input = data.input.narrow(0, first, rows);
    if (data.tree.defined()) data.tree = data.tree.narrow(0, first, rows);
    if (data.labels.defined()) data.labels = data.labels.narrow(0, first, rows);
  }
  ex.model->train();
  auto step = [&] {
    torch::Tensor total;
    {
      RECORD_FUNCTION("htm::forward", {});
      RowShardScope scope(shard);
      ForwardHooks truth;
      truth.tree = data.tree;
      auto out = ex.model->forward(data.input, ex.schedule, gen, &truth);
      auto per_sample = training_objective(ex.losses, out, data, 0, 0, true, false);
      BatchShare share;
      if (comm) share = {static_cast<double>(shard.rows) / batch, comm->sum({per_sample.detach().sum().item<double>()})[0] / batch, true};
      total = estimator.objective(per_sample, out.log_prob, out.entropy, share);
    }
    optimizer.zero_grad();
    {
      RECORD_FUNCTION("htm::backward", {});
      if (reducer) reducer->prepare();
      total.backward();
      if (reducer) reducer->finish();
    }
    RECORD_FUNCTION("htm::optimizer", {});
    optimizer.step();
  };
  auto ms = time_steps(step, steps, world ? "" : profile);
  const double med = median(ms);
  const int ranks = world ? world->world : 1;
  if (world && world->rank != 0) return 0;  // rank 0 speaks for the group
  std::printf("train    %s/%s  B=%lld T=%lld C=%lld L=%zu h=%lld params=%.2fM  step: median %.1f ms "
              "(min %.1f, max %.1f over %lld)  %.1f images/s  [%d process%s x %d thread%s]\n",
              ex.config.experiment.c_str(), variant.c_str(), (long long)batch, (long long)T,
              (long long)ex.config.settings.model.dim, ex.schedule.size(), (long long)ex.config.settings.model.heads,
              ex.parameters / 1e6, med, *std::min_element(ms.begin(), ms.end()),
              *std::max_element(ms.begin(), ms.end()), (long long)steps, batch * 1000.0 / med, ranks,
              ranks == 1 ? "" : "es", at::get_num_threads(), at::get_num_threads() == 1 ? "" : "s");
  std::printf("threads  %d   peak memory (VmHWM) %.0f MiB%s\n", at::get_num_threads(), peak_rss_mib(),
              world ? " (rank 0)" : "");
  std::fflush(stdout);
  if (world && reducer) {
    if (world->rank == 0)
      std::printf("data-parallel  %lld gradient bucket%s, %lld started before backward ended (last step)\n",
                  (long long)reducer->buckets(), reducer->buckets() == 1 ? "" : "s", (long long)reducer->started_early());
    return 0;
  }
  if (nproc > 1) {  // the same batch over nproc processes of one thread, against one process
    std::vector<double> one_thread = ms;
    if (at::get_num_threads() != 1) {
      set_threads(1);
      one_thread = time_steps(step, steps, "");
    }
    std::vector<std::string> rank_args = {self_path(), "bench", "--config", config_file, "--variant", variant,
                                          "--steps", std::to_string(steps)};
    for (const auto& o : overrides) rank_args.insert(rank_args.end(), {"--set", o});
    const std::string log = (std::filesystem::temp_directory_path() / ("htm-bench-rank0-" + std::to_string(getpid()) + ".log")).string();
    const int code = launch_ranks(rank_args, nproc, log);
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(log);
    std::printf("%s", text.c_str());
    if (code != 0) throw Error("the data-parallel ranks failed (exit code " + std::to_string(code) + ")");
    const size_t at = text.find(" images/s  [");
    const size_t from = text.rfind(' ', at - 1);
    const double dp = at == std::string::npos ? 0 : std::stod(text.substr(from + 1, at - from - 1));
    const double single = batch * 1000.0 / median(one_thread);
    std::printf("scaling  B=%lld: 1 process x 1 thread %.2f images/s, %d processes x 1 thread %.2f images/s: "
                "speed-up %.2fx, efficiency %.0f%%\n",
                (long long)batch, single, nproc, dp, dp / single, 100.0 * dp / (nproc * single));
  }
  return 0;
}

}  // namespace htm
