// `htm bench`: a training step of an experiment file's model (default: the paper's size, T=256,
// C=256, L=8, h=8, experiments/bench/paper_size.toml) and the pair sampler alone at its shape,
// timed as medians, with the GEMM rate of the same library, peak memory and thread count; also
// data-parallel (--nproc), the GEMM rates alone (--gemm) and a scaling table over T (--scaling).
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <boost/program_options.hpp>

#include "commands/bench_census.h"
#include "commands/bench_gemm.h"
#include "commands/bench_gradients.h"
#include "commands/commands.h"
#include "config/device.h"
#include "dist/communicator.h"
#include "dist/grad_reducer.h"
#include "htm/error.h"
#include "htm/policy.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "kernels/row_shard_scope.h"
#include "model/model.h"
#include "process/launch.h"
#include "registry.h"
#include "train/experiment.h"
#include "train/launch_count.h"
#include "train/memory.h"
#include "train/optimizer.h"
#include "train/step.h"
#include "train/trainer.h"

namespace po = boost::program_options;

namespace htm {
namespace {

using namespace bench;  // NOLINT: bench_census.h, bench_gemm.h, bench_gradients.h

double peak_rss_mib() { return peak_resident_mib(); }

// Starts a new VmHWM from the current resident size (Linux ≥ 4.0): the peak of what follows.
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The timed training steps of one configuration.
struct StepTiming {
  std::vector<double> ms;
  int64_t flops = 0;  ///< through htm::gemm in one step
  double peak_mib = 0;
  double before_mib = 0, forward_mib = 0, backward_mib = 0, optimizer_mib = 0;  ///< one more step, by phase
  double gpu_peak_mib = -1;       ///< on a GPU: the allocator's most allocated over the timed steps (-2: not built)
  double gpu_reserved_mib = 0;    ///< and the most it held (a CUDA graph's pool counts here, not above)
  double gpu_requested_mib = -1;  ///< and the most the tensors asked for (-1: this torch does not say)
  bool on_gpu = false;
  std::vector<double> device_ms;  ///< on a GPU: each timed step's own time there (events)
  std::string device_ms_note;     ///< or why there is none
  std::string graphs;             ///< runtime.cuda_graph: what the graphs did (TrainStep::graph_summary)
  std::vector<double> losses;     ///< each timed step's loss
  std::vector<int64_t> launches;  ///< an eager step's ops that run work, by phase (LaunchCount)
  int64_t host_reads = 0;         ///< and its values read to the host
  Census census;                  ///< --census: one eager step's memory (bench_census.h)
};

// One warm-up step, one profiled into `profile` (if named), then `steps` timed ones: forward at
// the full schedule, the losses and the estimator's surrogate, backward (data-parallel:
// gradients summed as they come), AdamW.
StepTiming time_training(Experiment& ex, Batch data, int64_t steps, const std::string& profile,
                         const std::optional<WorldInfo>& world, bool census = false) {
  const int64_t batch = data.input.size(0);
  std::unique_ptr<Communicator> comm;
  StepRequest request;
  request.schedule = ex.schedule;
  request.batch_rows = batch;
  if (world) {
    comm = std::make_unique<Communicator>(*world, "bench " + ex.config.hash, std::chrono::seconds(300));
    const auto [first, rows] = rows_of_rank(batch, world->rank, world->world);
    request.first = first;
    data.input = data.input.narrow(0, first, rows);
    if (data.tree.defined()) data.tree = data.tree.narrow(0, first, rows);
    if (data.labels.defined()) data.labels = data.labels.narrow(0, first, rows);
  }
  request.batch = data;
  // The trainer's own step (train/step.h): rollouts, the losses' hooks, the estimator, replay,
  // the anytime loss, the leaf classifier's probe, clipping and both optimisers.
  TrainStep train_step(ex, at::make_generator<at::CPUGeneratorImpl>(0), comm.get());
  ex.model->train();
  StepTiming t;
  std::vector<double> losses;
  auto step = [&] { losses.push_back(train_step(request).loss); };
  step();
  keep_freed_memory();  // as the trainer does after its first step
  const int64_t flops0 = gemm_flops();
  step();
  t.flops = gemm_flops() - flops0;
  // runtime.cuda_graph: the steps before the first replay (warm-ups, the capture) untimed, and as
  // many under "eager", whose timed steps are then the same steps as a graph's.
  if (ex.config.settings.runtime.cuda_graph != RuntimeCudaGraph::off) step(), step();
  if (!profile.empty()) {
    torch::autograd::profiler::RecordProfile guard(profile);
    step();
  }
  // One more eager step each (not where the steps are replayed, nor on a rank): what it launches,
  // and with --census what holds its memory.
  const bool eager = !world && ex.config.settings.runtime.cuda_graph == RuntimeCudaGraph::off;
  if (eager) {
    LaunchCount count;
    train_step.phase_ended = [&] { count.next_phase(); };
    step();
    train_step.phase_ended = nullptr;
    t.launches = count.phases();
    t.host_reads = count.host_reads();
  }
  if (eager && census) {
    const c10::Device where =
        ex.device.is_cuda() && !ex.device.has_index() ? c10::Device(c10::DeviceType::CUDA, 0) : ex.device;
    t.census = take_census(train_step, where, step);
  }
  const c10::Device device = ex.device;
  if (device.is_cuda() && gpu_memory_stats_built()) reset_gpu_peak(device);
  bench::DeviceTimer timer(device);
  t.ms = time_ms(static_cast<int>(steps), [&] {
    timer.start();
    step();
    timer.stop();
  });
  t.on_gpu = device.is_cuda();
  t.device_ms = timer.ms();
  t.device_ms_note = timer.unavailable();
  t.losses.assign(losses.end() - static_cast<int64_t>(t.ms.size()), losses.end());
  if (device.is_cuda()) {
    const GpuPeaks peaks = gpu_peaks(device);
    t.gpu_peak_mib = gpu_memory_stats_built() ? peaks.allocated : -2;
    t.gpu_reserved_mib = peaks.reserved;
    t.gpu_requested_mib = peaks.requested;
  }
  t.peak_mib = peak_rss_mib();
  if (!world) {  // one more step for the peak of each phase (the process's memory, libraries included)
    double* phase_peak[] = {&t.forward_mib, &t.backward_mib};
    int phase = 0;
    train_step.phase_ended = [&] {
      *phase_peak[phase++] = peak_rss_mib();
      reset_peak();
    };
    malloc_trim(0);  // hand what the allocator keeps from earlier steps back: the phases' own growth
    t.before_mib = status_mib("VmRSS");
    reset_peak();
    step();
    t.optimizer_mib = peak_rss_mib();
  }
  t.graphs = train_step.graph_summary();
  if (world && world->rank == 0 && train_step.reducer())
    std::printf("data-parallel  %lld gradient bucket%s, %lld started before backward ended (last step)\n",
                (long long)train_step.reducer()->buckets(), train_step.reducer()->buckets() == 1 ? "" : "s",
                (long long)train_step.reducer()->started_early());
  return t;
}

// What a summary line is of: the configuration timed, its batch and T, the GEMM peak its % is of.
struct Timed {
  std::string name;
  int64_t batch = 0, T = 0;
  double gemm_peak = 0;
};

// The line `htm bench` prints for every configuration it times, the same fields in the same order.
void summary(const Timed& what, const StepTiming& t, int ranks, int threads) {
  const int64_t batch = what.batch, T = what.T;
  const double gemm_peak = what.gemm_peak, ms = median(t.ms),
               gflops = static_cast<double>(t.flops) * ranks / ms / 1e6;  // each rank counts its rows
  std::printf(
      "summary  %-28s B=%lld T=%-4lld %d process%s x %d thread%s  %7.1f ms  %6.2f images/s  %6.1f GFLOP/s  "
      "%3.0f%% of GEMM peak  %5.0f MiB\n",
      what.name.c_str(), (long long)batch, (long long)T, ranks, ranks == 1 ? "" : "es", threads,
      threads == 1 ? "" : "s", ms, batch * 1000.0 / ms, gflops, 100.0 * gflops / (gemm_peak * ranks), t.peak_mib);
  std::fflush(stdout);
}

// The resident memory around one step: before it, and the peak of each phase; on a GPU, the
// memory allocated there.
void memory_line(const std::string& what, const StepTiming& t, double gemm_peak) {
  if (t.gpu_peak_mib >= 0) {
    std::printf(
        "memory   %-28s GPU: peak %.1f MiB allocated, %.1f MiB reserved over the timed steps (the caching "
        "allocator's)\n",
        what.c_str(), t.gpu_peak_mib, t.gpu_reserved_mib);
    if (t.gpu_requested_mib >= 0)
      std::printf(
          "memory   %-28s GPU: peak %.1f MiB requested by the tensors (allocated less the allocator's rounding "
          "and the blocks it gave whole)\n",
          what.c_str(), t.gpu_requested_mib);
  } else if (t.gpu_peak_mib == -2)
    std::printf("memory   %-28s GPU: not measured (this build has no CUDA allocator statistics)\n", what.c_str());
  if (!t.device_ms.empty())
    std::printf(
        "gputime  %-28s the GPU's own time a step (events on its stream): median %.1f ms of %zu, the host's %.1f ms\n",
        what.c_str(), median(t.device_ms), t.device_ms.size(), median(t.ms));
  else if (t.on_gpu)
    std::printf("gputime  %-28s the GPU's own time: not measured (%s)\n", what.c_str(), t.device_ms_note.c_str());
  std::printf(
      "memory   %-28s resident MiB: %.0f before the step; peak %.0f in forward, %.0f in backward, "
      "%.0f in the optimiser\n",
      what.c_str(), t.before_mib, t.forward_mib, t.backward_mib, t.optimizer_mib);
  if (t.launches.size() == 3) {  // and what a step costs beyond its arithmetic (issue: small models)
    const int64_t ops = t.launches[0] + t.launches[1] + t.launches[2];
    const double ms = median(t.ms), arithmetic = static_cast<double>(t.flops) / gemm_peak / 1e6;  // ms at the peak
    std::printf(
        "launches %-28s %lld in one eager step: forward %lld, backward %lld, optimiser %lld (torch ops that run "
        "work: about a GPU's kernel launches); %lld values read to the host\n"
        "overhead %-28s %.1f us an op (%.1f ms over %lld ops); its %.3f GFLOP at the GEMM peak take %.2f ms: "
        "%.0f%% of the step is arithmetic\n",
        what.c_str(), (long long)ops, (long long)t.launches[0], (long long)t.launches[1], (long long)t.launches[2],
        (long long)t.host_reads, what.c_str(), ms * 1000.0 / ops, ms, (long long)ops, t.flops / 1e9, arithmetic,
        100.0 * arithmetic / ms);
    if (!t.on_gpu) {  // and what dispatch alone would take: the rest of "µs an op" is the ops' own work
      const double floor = dispatch_floor_us();
      std::printf(
          "overhead %-28s dispatch floor %.1f us an op (a 256x16 sum with its autograd node, this thread): "
          "%.1f ms of the step for %lld ops, %.0f%%\n",
          what.c_str(), floor, floor * ops / 1000.0, (long long)ops, 100.0 * floor * ops / 1000.0 / ms);
    }
  }
  if (t.census.peak >= 0) print_census(what, t.census);
  if (t.graphs.empty()) return;
  std::printf("graph    %-28s cuda_graph: %s\n", what.c_str(), t.graphs.c_str());
  std::string losses;  // a graph's replays against "eager": the same numbers, bit for bit
  for (double loss : t.losses) losses += (losses.empty() ? "" : " ") + c10::str(std::hexfloat, loss);
  std::printf("losses   %-28s %s\n", what.c_str(), losses.c_str());
}

struct Configured {
  Experiment ex;
  Batch data;
  int64_t T = 0;
};
Configured configure(const std::string& config_file, std::vector<std::string> overrides, std::string variant,
                     const Registry& registry) {
  ExperimentFile file = ExperimentFile::load(config_file, overrides);
  if (variant.empty()) variant = file.variants().front();
  Configured c{assemble(file.resolve(variant, registry), registry, 0), {}, 0};
  const int64_t batch = std::min(c.ex.config.settings.train.batch_size, c.ex.dataset->size(Split::train));
  c.data = on_device(c.ex.dataset->get(Split::train, torch::arange(batch)), c.ex.device);
  if (auto* htm_model = dynamic_cast<HtmModelImpl*>(c.ex.model.get())) c.T = htm_model->num_tokens();
  return c;
}

// Runs `htm bench ARGS` in processes of its own: one (`--step-only`, for a clean peak memory) or
// `nproc` data-parallel ranks. Prints the output (rank 0's) and returns it.
std::string child_bench(std::vector<std::string> args, double gemm_peak, int nproc = 1) {
  args.insert(args.begin(), {self_path(), "bench"});
  if (nproc == 1) args.push_back("--step-only");
  const std::string log =
      (std::filesystem::temp_directory_path() / ("htm-bench-" + std::to_string(getpid()) + ".log")).string();
  setenv("HTM_BENCH_GEMM_PEAK", std::to_string(gemm_peak).c_str(), 1);  // the children's % of peak
  const int code = nproc == 1 ? run_child(args, log) : launch_ranks(args, nproc, RankLaunch{log});
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(log);
  std::printf("%s", text.c_str());
  std::fflush(stdout);
  if (code != 0) throw Error("a timed configuration failed (exit code " + std::to_string(code) + ")");
  return text;
}

// --scaling: the step at image sides 16, 32, 64 (T = 64, 256, 1024 at patch 2, merged to one
// root), each in its own process, then the sampler alone up to T = 4096, with fitted exponents.
void scaling(const std::string& config_file, const std::vector<std::string>& overrides, int64_t steps, int threads,
             double gemm_peak) {
  std::vector<double> tokens, step_ms;
  for (int side : {16, 32, 64}) {
    const int layers = static_cast<int>(std::lround(std::log2(side * side / 4)));
    std::vector<std::string> args = {
        "--config", config_file, "--steps", std::to_string(steps), "--threads", std::to_string(threads)};
    for (const auto& o : overrides) args.insert(args.end(), {"--set", o});
    args.insert(args.end(),
                {"--set", "dataset.size=" + std::to_string(side), "--set", "model.layers=" + std::to_string(layers)});
    const std::string text = child_bench(args, gemm_peak);
    tokens.push_back(side * side / 4.0);
    step_ms.push_back(number_before(text, " ms "));
  }
  std::printf("scaling  step time ~ T^%.2f over T = 64..1024 (fixed C; attention alone would be T^2, the MLPs T^1)\n",
              fitted_exponent(tokens, step_ms));
  std::vector<double> sizes, sampler_ms, t2logt;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  // About T² log T (native, gpu) or T³ (the reference's T/2 rounds of an arg-max over B×T² keys):
  // T doubles while the next size (about 8× this one) takes under 30 s a call; the reference stops at 1024.
  const auto probe = torch::empty({0});
  int64_t largest = 256;
  double last_ms = 0;
  for (int64_t T = 256; T <= 4096 && last_ms * 8 < 30000; T *= 2) {
    auto logits = torch::randn({8, T, T});
    const int repeats = T >= 2048 || last_ms * 8 > 1000 ? 3 : 7;
    const double ms = median(time_ms(repeats, [&] { sample_disjoint_pairs(logits, T / 2, gen); }));
    std::printf("sampler  B=8 T=%-4lld r=%-4lld median %9.2f ms  (%.2f ns per T^2 log2 T)\n", (long long)T,
                (long long)T / 2, ms, ms * 1e6 / (8.0 * T * T * std::log2(T)));
    sizes.push_back(static_cast<double>(T));
    sampler_ms.push_back(ms);
    t2logt.push_back(T * T * std::log2(T));
    largest = T, last_ms = ms;
  }
  std::printf(
      "sampler  time ~ T^%.2f over T = 256..%lld (T^2 log T alone: T^%.2f over the same range); the %s "
      "backend's sampler\n",
      fitted_exponent(sizes, sampler_ms), (long long)largest, fitted_exponent(sizes, t2logt),
      backend_for(probe).name());
}

// htm bench's command line.
struct BenchArgs {
  int64_t threads = 1, steps = 5;
  int nproc = 1;
  std::string profile, config_file, variant;
  std::vector<std::string> overrides;
  int64_t gradient_draws = 0, train_first = 0;
};

po::options_description bench_options(BenchArgs& a) {
  po::options_description opts("options");
  opts.add_options()("threads", po::value(&a.threads)->default_value(1), "torch threads (0 = all cores)")(
      "steps", po::value(&a.steps)->default_value(5), "timed training steps (after one warm-up)")(
      "config", po::value(&a.config_file)->default_value("bench/paper_size.toml"),
      "experiment file whose model, data and batch size are timed (default: the paper's size)")(
      "variant", po::value(&a.variant), "the variant (default: the first)")(
      "set", po::value(&a.overrides)->composing(),
      "override a setting, e.g. --set train.batch_size=32 --set policy.plugin=random")(
      "profile", po::value(&a.profile), "write a chrome://tracing profile of one step to this file")(
      "nproc", po::value(&a.nproc)->default_value(1),
      "also time the step data-parallel: N processes of one thread, each a slice of the same batch")(
      "gemm", "only the GEMM rates: fp32 and bf16 through htm's oneDNN GEMMs and through torch::mm")(
      "scaling",
      "also the step at T = 64, 256, 1024 (each in its own process) and the sampler up to T = 4096, "
      "with fitted exponents")("step-only", "the training step's summary line alone (no GEMM rates, no sampler)")(
      "census",
      "also one step's memory census: the most tensor memory alive at once on the run's device, and what "
      "held it, by the htm scope, autograd node and torch op that made it")(
      "gradient-variance", po::value(&a.gradient_draws)->default_value(0),
      "N: only the policy gradient's variance over N draws of one batch (no update), the time of one "
      "gradient, and their product: the variance at equal compute")(
      "train-first", po::value(&a.train_first)->default_value(0),
      "with --gradient-variance: K training steps first, on successive batches of the training set");
  return opts;
}

// The training step's line: the model's size, the step's median (min, max) and rate.
void print_step(const std::string& name, const Experiment& ex, int64_t batch, int64_t T, const StepTiming& t,
                int64_t steps) {
  const double med = median(t.ms);
  std::printf(
      "train    %s  B=%lld T=%lld C=%lld L=%zu h=%lld params=%.2fM  step: median %.1f ms "
      "(min %.1f, max %.1f over %lld)  %.1f images/s  %.2f GFLOP through htm::gemm per step\n",
      name.c_str(), (long long)batch, (long long)T, (long long)ex.config.settings.model.dim, ex.schedule.size(),
      (long long)ex.config.settings.model.heads, ex.parameters / 1e6, med, *std::min_element(t.ms.begin(), t.ms.end()),
      *std::max_element(t.ms.begin(), t.ms.end()), (long long)steps, batch * 1000.0 / med, t.flops / 1e9);
}

// The pair sampler alone on B×T×T logits, the first layer's r pairs, against the one-pair-at-a-
// time reference; and the log-probabilities of its draw, forward and backward, in each form.
void time_sampler(Experiment& ex, int64_t batch, int64_t T, at::Generator gen) {
  const int64_t r = ex.schedule.empty() ? T / 2 : std::max<int64_t>(1, ex.schedule.front());
  auto logits = torch::randn({batch, T, T}, torch::TensorOptions().device(ex.device));
  auto fast = time_ms(20, [&] { sample_disjoint_pairs(logits, r, gen); });
  // The one-pair-at-a-time reference runs where its generator is: on the CPU.
  auto host_logits = logits.to(torch::kCPU);  // host: the reference sampler
  auto slow = time_ms(2, [&] { sample_disjoint_pairs_sequential(host_logits, r, gen); });
  std::printf(
      "sampler  B=%lld T=%lld r=%lld  gumbel-sort-scan: median %.2f ms   "
      "one-pair-at-a-time: median %.1f ms   (%.0fx)\n",
      (long long)batch, (long long)T, (long long)r, median(fast), median(slow), median(slow) / median(fast));
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

// The same batch over `nproc` processes of one thread, against one process of one thread.
void time_ranks(Configured& c, const StepTiming& t, const Timed& what, RuntimePrecision precision, const BenchArgs& a,
                int nthreads) {
  Experiment& ex = c.ex;
  const int64_t batch = what.batch, steps = a.steps;
  const int nproc = a.nproc;
  StepTiming one = t;
  Timed lone = what;  // one process of one thread, against its own GEMM peak
  if (nthreads != 1) {
    set_threads(1);
    lone.gemm_peak = gemm_rates(1024, ex.device).of(precision);
    one = time_training(ex, c.data, steps, "", std::nullopt);
    summary(lone, one, 1, 1);
  }
  std::vector<std::string> rank_args = {"--config",        a.config_file, "--variant",
                                        ex.config.variant, "--steps",     std::to_string(steps)};
  for (const auto& o : a.overrides) rank_args.insert(rank_args.end(), {"--set", o});
  const double dp = number_before(child_bench(rank_args, lone.gemm_peak, nproc), " images/s ");
  const double single = batch * 1000.0 / median(one.ms);
  std::printf(
      "scaling  B=%lld: 1 process x 1 thread %.2f images/s, %d processes x 1 thread %.2f images/s: "
      "speed-up %.2fx, efficiency %.0f%%\n",
      (long long)batch, single, nproc, dp, dp / single, 100.0 * dp / (nproc * single));
}

}  // namespace

int cmd_bench(const Args& args) {
  BenchArgs a;
  po::options_description opts = bench_options(a);
  int64_t& threads = a.threads;
  int64_t& steps = a.steps;
  int& nproc = a.nproc;
  const std::string &profile = a.profile, &config_file = a.config_file, &variant = a.variant;
  const std::vector<std::string>& overrides = a.overrides;
  po::variables_map vm;
  if (!parse_options("bench", args, opts, {}, vm, "[options]")) return 0;
  if (nproc < 1) throw Error("--nproc " + std::to_string(nproc) + ": must be at least 1");
  if (threads < 0) throw Error("--threads " + std::to_string(threads) + ": must be 0 (all cores) or more");
  const std::optional<WorldInfo> world = world_from_environment();
  if (world) {  // a rank of `--nproc`: the training step alone, on this rank's rows
    threads = 1;
    nproc = 1;
  }
  set_threads(threads);
  const int nthreads = at::get_num_threads();
  const bool step_only = vm.count("step-only") > 0;
  Registry registry;
  Configured c = configure(config_file, overrides, variant, registry);
  Experiment& ex = c.ex;
  // after assembly: the file's runtime.threads is not what is timed
  const RuntimePrecision precision = use_runtime(ex.config.settings.runtime, threads);
  const std::string name =
      ex.config.experiment + "/" + ex.config.variant + (precision == RuntimePrecision::bf16 ? " bf16" : " fp32");
  if (a.gradient_draws > 0 && !world) {  // its line alone: no GEMM rates, no step timing
    print_gradient_noise(name, gradient_noise(ex, c.data, a.gradient_draws, a.train_first));
    return 0;
  }
  const char* given_peak = std::getenv("HTM_BENCH_GEMM_PEAK");  // a parent measured it, in our precision
  GemmRates peak;
  if (given_peak != nullptr) peak.htm_fp32 = peak.htm_bf16 = std::atof(given_peak);
  const Backend& backend = backend_for(torch::empty({0}, torch::TensorOptions().device(ex.device)));
  if (!world && !step_only) {
    peak = print_gemm_rates(vm.count("gemm") > 0, ex.device, backend, nthreads);
    if (vm.count("gemm")) {
      std::printf("bf16     hardware: %s\n", bf16_hardware().c_str());
      return 0;
    }
  } else if (given_peak == nullptr) {
    peak = gemm_rates(1024, ex.device);  // the summary's % of peak, unprinted
  }
  const double gemm_peak = peak.of(precision);
  const int64_t batch = c.data.input.size(0), T = c.T;
  const Timed what{name, batch, T, gemm_peak};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);

  if (T >= 2 && !world && !step_only) time_sampler(ex, batch, T, gen);

  // ---- training steps
  const StepTiming t = time_training(ex, c.data, steps, world ? "" : profile, world, vm.count("census") > 0);
  if (world) {
    if (world->rank != 0) return 0;  // rank 0 speaks for the group
    std::fflush(stdout);
    summary(what, t, world->world, 1);
    return 0;
  }
  if (step_only) {
    summary(what, t, 1, nthreads);
    memory_line(name, t, gemm_peak);
    return 0;
  }
  print_step(name, ex, batch, T, t, steps);
  summary(what, t, 1, nthreads);
  memory_line(name, t, gemm_peak);
  if (nproc > 1) time_ranks(c, t, what, precision, a, nthreads);
  if (vm.count("scaling")) scaling(config_file, overrides, steps, nthreads, gemm_peak);
  return 0;
}
const RegisterCommand register_bench(140, "bench", "time a training step, the pair sampler and the GEMMs", cmd_bench);

}  // namespace htm
