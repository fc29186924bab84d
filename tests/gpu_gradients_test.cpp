// The gradients of shared parameters summed at once under the gpu kernels (kernels/gpu.h,
// gpu_gradients.cpp): the same gradients as autograd's own adds, bit for bit, in fewer launches;
// and LaunchCount (train/launch_count.h), which counts them, and MemoryCensus beside it.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "commands/bench_gemm.h"
#include "config/device.h"
#include "config/experiment_config.h"
#include "htm/error.h"
#include "kernels/gpu.h"
#include "kernels/kernels.h"
#include "plugins_util.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/launch_count.h"
#include "train/memory_census.h"
#include "train/step.h"

namespace htm {
namespace {

// A consumer that gives its input no gradient (autograd then adds nothing for that use).
class NoGradient : public torch::autograd::Function<NoGradient> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) { return x * 2; }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    return {torch::Tensor()};
  }
};

// w used four times (one use with no gradient, terms of very different sizes, so the order of
// the adds shows in the bits), b twice through one add (whose backward hands the same tensor to
// both), c once; the loss's gradients with and without the rewrite.
std::vector<torch::Tensor> hand_made(bool at_once, int64_t* saved, const torch::Device& device = torch::kCPU) {
  auto on = [&](std::vector<float> v) { return torch::tensor(v).to(device); };
  auto w = on({1.5f, -2.25f, 3.0f}).requires_grad_();
  auto b = on({0.5f, 0.25f, -1.0f}).requires_grad_();
  auto c = on({2.0f}).requires_grad_();
  const auto big = on({1e8f, 3e7f, -2e8f}), small = on({1.0f, 0.3f, 7.0f});
  auto loss = (w * big).sum() + (w * small).sum() + (w * -big).sum() + NoGradient::apply(w).sum() +
              (b + b).pow(2).sum() + (c * w.sum()).sum();
  *saved = at_once ? gpu::sum_shared_gradients_at_once(loss) : 0;
  loss.backward();
  return {w.grad(), b.grad(), c.grad()};
}

TEST(GpuGradients, AHandMadeGraphGetsAutogradsSumsBitForBitUndefinedAndSharedGradientsIncluded) {
  int64_t saved_on = 0, saved_off = 0;
  const auto on = hand_made(true, &saved_on), off = hand_made(false, &saved_off);
  // w: 5 uses (4 products and the sum c multiplies), b: 2 (its add's two inputs); c alone is left.
  EXPECT_EQ(saved_on, (5 - 1) + (2 - 1));
  for (size_t i = 0; i < on.size(); ++i) {
    ASSERT_TRUE(on[i].defined() && off[i].defined()) << i;
    EXPECT_TRUE(torch::equal(on[i], off[i])) << i << ": " << on[i] << " against " << off[i];
  }
  // Rewritten once: a second look at the same graph finds nothing left to sum.
  auto w = torch::ones({2}).requires_grad_();
  auto loss = (w * 2).sum() + (w * 3).sum();
  EXPECT_EQ(gpu::sum_shared_gradients_at_once(loss), 1);
  EXPECT_EQ(gpu::sum_shared_gradients_at_once(loss), 0);
  loss.backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::full({2}, 5.0f)));
  EXPECT_EQ(gpu::sum_shared_gradients_at_once(torch::ones({1})), 0);  // no graph: nothing to do
}

Experiment tiny_trees(const std::string& dir, const std::string& device) {
  std::ofstream(dir + "/g.toml") << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 64\ntest_size = 16\n"
                                 << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n"
                                 << "[model]\ndim = 16\nheads = 2\nlayers = 4\ndropout = 0.2\n"
                                 << "[estimator]\nrollouts = 2\nbaseline = \"rloo\"\n"
                                 << "[train]\nbatch_size = 8\n[runtime]\nthreads = 1\ndevice = \"" << device << "\"\n";
  ExperimentFile file = ExperimentFile::load(dir + "/g.toml", {});
  return assemble(file.resolve(file.variants()[0], htm::testing::plugins()), htm::testing::plugins(), 0);
}

struct Step {
  std::vector<torch::Tensor> grads;
  std::vector<int64_t> launches;  // forward, backward (LaunchCount: a GPU's launches, about)
};

Step trees_step(bool at_once, const std::string& device = "cpu") {
  KernelsScope kernels(Kernels::gpu);
  gpu::SharedGradientsScope scope(at_once);
  Experiment ex = tiny_trees(htm::testing::fresh_dir("gpu_gradients"), device);
  ex.model->train();
  torch::manual_seed(7);
  StepRequest request;
  request.batch = on_device(ex.dataset->get(Split::train, torch::arange(8)), ex.device);
  request.batch_rows = 8;
  request.schedule = ex.schedule;
  TrainStep train_step(ex, at::make_generator<at::CPUGeneratorImpl>(3));
  Step s;
  {
    LaunchCount count;
    train_step.phase_ended = [&] { count.next_phase(); };
    train_step(request);  // the trainer's step: its gradients stay in the parameters
    s.launches = count.phases();
  }
  for (const auto& p : ex.model->parameters()) s.grads.push_back(p.grad());
  return s;
}

// Trees at 16 points: the blocks are used at each of the 4 depths, so most parameters have 4
// gradients to sum.
TEST(GpuGradients, ATreesStepsGradientsAreAutogradsBitForBitInFewerLaunches) {
  trees_step(true);  // the first step makes the constants (device_constant) both then share
  const Step off = trees_step(false), on = trees_step(true);
  ASSERT_EQ(on.grads.size(), off.grads.size());
  int64_t reached = 0;
  for (size_t i = 0; i < on.grads.size(); ++i) {
    ASSERT_EQ(on.grads[i].defined(), off.grads[i].defined()) << i;
    if (!on.grads[i].defined()) continue;
    EXPECT_TRUE(torch::equal(on.grads[i], off.grads[i]))
        << "parameter " << i << ": most difference " << (on.grads[i] - off.grads[i]).abs().max().item<double>();
    reached += on.grads[i].abs().sum().item<double>() > 0;
  }
  EXPECT_GT(reached, 40);
  // The same forward; in backward each shared parameter's 3 adds become a share of 3 foreach
  // launches.
  ASSERT_GE(on.launches.size(), 2u);
  ASSERT_GE(off.launches.size(), 2u);
  EXPECT_EQ(on.launches[0], off.launches[0]);
  EXPECT_LT(on.launches[1], off.launches[1] - 150) << on.launches[1] << " against " << off.launches[1];
  std::cout << "[ gpu kernels, one tiny Trees step's backward: " << off.launches[1]
            << " launches with autograd's adds, " << on.launches[1] << " with the shared gradients summed at once ]\n";
}

// On a GPU the engine runs backward on the device's own thread and stream: the same sums there,
// bit for bit on the hand-made graph; a Trees step's backward has atomic adds (a gather's
// backward), whose order a GPU does not fix, so there the gradients agree to rounding.
// Two blocks used at 8 depths each, an "encoder" w2 and then a "decoder" w1 (1 MiB each):
// backward gives w1's 8 gradients first, then w2's. Each block's gradients are summed as its
// uses arrive (a group of its own), so backward holds about what autograd's adds hold, not w1's
// 8 gradients until w2's have come (as one node for all, or rounds over all parameters, would).
struct HeldInBackward {
  std::vector<torch::Tensor> grads;
  int64_t peak = 0;
  int64_t saved = 0;
};

HeldInBackward two_blocks(bool at_once) {
  torch::manual_seed(3);
  auto w1 = (torch::randn({512, 512}) / 20).requires_grad_();
  auto w2 = (torch::randn({512, 512}) / 20).requires_grad_();
  auto h = torch::randn({1, 512});
  for (int depth = 0; depth < 8; ++depth) h = torch::tanh(torch::mm(h, w2));
  for (int depth = 0; depth < 8; ++depth) h = torch::tanh(torch::mm(h, w1));
  auto loss = h.sum();
  HeldInBackward r;
  r.saved = at_once ? gpu::sum_shared_gradients_at_once(loss) : 0;
  {
    MemoryCensus census;
    loss.backward();
    r.peak = census.peak_bytes();
  }
  r.grads = {w1.grad(), w2.grad()};
  return r;
}

TEST(GpuGradients, EachBlocksGradientsAreSummedAsTheyArriveNotHeldToTheEnd) {
  const HeldInBackward off = two_blocks(false), on = two_blocks(true);
  EXPECT_EQ(on.saved, 2 * 7);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(on.grads[i], off.grads[i])) << i;
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_LE(on.peak, off.peak + 2 * kMiB) << "autograd's adds held " << off.peak / kMiB << " MiB at most";
  EXPECT_LT(on.peak, 6 * kMiB);  // w1's 8 gradients held together would be 8 MiB
  std::cout << "[ backward's peak above its start: " << off.peak / 1048576.0 << " MiB with autograd's adds, "
            << on.peak / 1048576.0 << " with the sums a group's round at a time ]" << std::endl;
}

TEST(GpuGradientsOnAGpu, TheSumsAreAutogradsThereToo) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  int64_t saved_on = 0, saved_off = 0;
  const auto on = hand_made(true, &saved_on, torch::kCUDA), off = hand_made(false, &saved_off, torch::kCUDA);
  EXPECT_EQ(saved_on, 5);
  for (size_t i = 0; i < on.size(); ++i) EXPECT_TRUE(torch::equal(on[i], off[i])) << i;
  const Step a = trees_step(false, "cuda"), b = trees_step(true, "cuda");
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].defined(), b.grads[i].defined()) << i;
    if (a.grads[i].defined())
      EXPECT_TRUE(torch::allclose(a.grads[i], b.grads[i], 1e-4, 1e-6))
          << "parameter " << i << ": most difference " << (a.grads[i] - b.grads[i]).abs().max().item<double>();
  }
  EXPECT_LT(b.launches[1], a.launches[1]);
}

// What LaunchCount counts: one for an op that runs work, composite or not; none for views, no-op
// conversions and allocations; host reads apart; phases in order.
// Clipping on the device scales the gradients as torch's clip_grad_norm_ does, and reads nothing
// back (torch's reads the norm: a wait for the device every step). On a GPU too where there is
// one (there the multi-tensor multiply by a tensor, found by name, does the scaling).
TEST(GpuGradients, ClippingScalesAsTorchDoesAndReadsNothingBack) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (cuda_usable()) devices.emplace_back(torch::kCUDA, 0);
  for (const auto& device : devices)
    for (const double max_norm : {0.5, 1e6}) {  // clipped, and left alone (the scale clamped to 1)
      torch::manual_seed(6);
      std::vector<torch::Tensor> init = {torch::randn({50}), torch::randn({7, 3}), torch::randn({4})};
      std::vector<torch::Tensor> grads0 = {torch::randn({50}), torch::randn({7, 3}), torch::randn({4})};
      std::vector<std::vector<torch::Tensor>> sets(2);
      for (auto& set : sets)
        for (size_t i = 0; i < init.size(); ++i) {
          set.push_back(init[i].to(device).requires_grad_(true));
          set.back().mutable_grad() = grads0[i].to(device);
        }
      sets[0].push_back(torch::zeros({2}, torch::TensorOptions(device)).requires_grad_(true));  // no gradient
      int64_t torch_reads = 0, device_reads = 0;
      {
        LaunchCount count;
        torch::nn::utils::clip_grad_norm_(sets[1], max_norm);
        torch_reads = count.host_reads();
      }
      {
        LaunchCount count;
        gpu_backend().clip_gradients(sets[0], max_norm);
        device_reads = count.host_reads();
      }
      const std::string what = device.str() + ", max norm " + std::to_string(max_norm);
      EXPECT_EQ(device_reads, 0) << what;
      EXPECT_GE(torch_reads, 1) << what;
      double norm = 0;
      for (size_t i = 0; i < init.size(); ++i) {
        EXPECT_TRUE(torch::allclose(sets[0][i].grad(), sets[1][i].grad(), 1e-6, 0)) << what << ", tensor " << i;
        norm += sets[0][i].grad().pow(2).sum().item<double>();
      }
      if (max_norm < 1) EXPECT_NEAR(std::sqrt(norm), max_norm, 1e-5) << what;
      if (max_norm > 1) EXPECT_TRUE(torch::equal(sets[0][0].grad(), grads0[0].to(device))) << what;
    }
}

TEST(LaunchCount, CountsTheOpsThatRunWorkOnceEachAndTheirPhases) {
  auto a = torch::randn({4, 3}), w = torch::randn({5, 3}), b = torch::randn({5});
  std::vector<torch::Tensor> many = {a.clone(), a.clone(), a.clone()};
  LaunchCount count;
  auto v = a.view({3, 4}).reshape({12}).to(torch::kFloat).contiguous().unsqueeze(1).transpose(0, 1);  // none
  auto e = torch::empty({8});  // an allocation: none
  EXPECT_EQ(count.launches(), 0);
  auto y = torch::linear(a, w, b);  // one (its addmm), not its transpose
  auto s = a + 1;                   // one
  EXPECT_EQ(count.launches(), 2);
  count.next_phase();
  at::_foreach_add_(many, 1.0);                // one, though a CPU loops over the tensors
  auto copied = a.t().contiguous();            // one: the copy a maybe-view makes
  const double read = s.sum().item<double>();  // one (the sum), and a read
  EXPECT_EQ(count.phases(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(count.host_reads(), 1);
  EXPECT_EQ(count.launches(), 5);
  EXPECT_THROW(LaunchCount another, Error);
  (void)v, (void)e, (void)y, (void)copied, (void)read;
}

// What MemoryCensus counts: the tensors made while it lives, by scope and op; the peak and what
// was alive at it; frees; nothing made before it began.
TEST(MemoryCensus, NamesTheTensorsAliveAtThePeakByWhereTheyWereMade) {
  auto before = torch::ones({1 << 18});  // 1 MiB made earlier: not counted, even when freed
  MemoryCensus census;
  torch::Tensor kept;
  {
    RECORD_FUNCTION("htm::census_test", {});
    kept = torch::ones({1 << 20});                         // 4 MiB
    auto passing = torch::zeros({1 << 21}).add_(1).sum();  // 8 MiB, gone before the end
  }
  before = torch::Tensor();
  EXPECT_EQ(census.live_bytes(), int64_t{1} << 22);  // the 4 MiB kept
  EXPECT_GE(census.peak_bytes(), (int64_t{1} << 22) + (int64_t{1} << 23));
  const auto sites = census.at_peak();
  ASSERT_GE(sites.size(), 2u);
  EXPECT_EQ(sites[0].where, "htm::census_test aten::zeros");
  EXPECT_EQ(sites[0].bytes, int64_t{1} << 23);
  EXPECT_EQ(sites[1].where, "htm::census_test aten::ones");
  EXPECT_EQ(sites[1].bytes, int64_t{1} << 22);
  EXPECT_EQ(census.phase_at_peak(), 0);
  EXPECT_EQ(census.at_peak_among({kept.storage().data()}), int64_t{1} << 22);  // of the peak, what `kept` holds
  EXPECT_EQ(census.at_peak_among({}), 0);
  EXPECT_THROW(MemoryCensus another, Error);
}

// A GPU's caching allocator reports freeing a block made before the census began (a CPU's does
// not: it only knows the sizes of what it made while someone listened): the peak is then the most
// the memory rose above where it stood, and the phases say where it was.
TEST(MemoryCensus, SubtractsWhatWasMadeBeforeAndFreedAndNamesThePhaseOfThePeak) {
  MemoryCensus census;
  const c10::Device cpu(c10::DeviceType::CPU);
  static char earlier, made[2];
  constexpr int64_t kMiB = int64_t{1} << 20;
  c10::reportMemoryUsageToProfiler(&earlier, -3 * kMiB, 0, 0, cpu);  // 3 MiB made earlier, freed
  census.next_phase();
  c10::reportMemoryUsageToProfiler(&made[0], 2 * kMiB, 0, 0, cpu);
  EXPECT_EQ(census.peak_bytes(), 0);  // 2 made, 3 freed: below the start
  census.next_phase();
  c10::reportMemoryUsageToProfiler(&made[1], 4 * kMiB, 0, 0, cpu);
  c10::reportMemoryUsageToProfiler(&made[0], -2 * kMiB, 0, 0, cpu);
  EXPECT_EQ(census.live_bytes(), 4 * kMiB);
  EXPECT_EQ(census.freed_earlier_bytes(), 3 * kMiB);
  EXPECT_EQ(census.peak_bytes(), 3 * kMiB);  // 2 + 4 − 3, before the 2 went
  EXPECT_EQ(census.phase_at_peak(), 2);
  EXPECT_EQ(census.freed_earlier_at_peak(), 3 * kMiB);
  EXPECT_EQ(census.at_peak_among({&made[1]}), 4 * kMiB);
  // made[0] held 2 MiB at the peak, but what lives at its address now is another allocation
  c10::reportMemoryUsageToProfiler(&made[0], kMiB, 0, 0, cpu);
  EXPECT_EQ(census.at_peak_among({&made[0], &earlier}), 0);
  EXPECT_EQ(census.at_peak_among({&made[0], &made[1]}), 4 * kMiB);
}

// htm bench's device timer: events on the GPU's stream around each call; off a GPU none, and why.
TEST(DeviceTimer, OffAGpuThereIsNoDeviceTimeAndItSaysWhy) {
  bench::DeviceTimer timer(torch::Device("cpu"));
  timer.start();
  auto x = torch::ones({64, 64}).mm(torch::ones({64, 64}));
  timer.stop();
  EXPECT_TRUE(timer.ms().empty());
  EXPECT_EQ(timer.unavailable(), "not on a GPU");
  (void)x;
}

TEST(DeviceTimerOnAGpu, TimesEachCallOnTheGpusStream) {
  if (!cuda_usable()) GTEST_SKIP() << "skipped: this libtorch has no CUDA or sees no GPU";
  const torch::Device gpu("cuda:0");
  auto a = torch::randn({2048, 2048}, gpu);
  bench::DeviceTimer timer(gpu);
  std::vector<double> host;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    timer.start();
    auto c = a.mm(a);
    timer.stop();
    torch::cuda::synchronize();
    host.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto ms = timer.ms();
  ASSERT_EQ(ms.size(), 3u) << timer.unavailable();
  for (size_t i = 0; i < ms.size(); ++i) {
    EXPECT_GT(ms[i], 0) << i;
    EXPECT_LE(ms[i], host[i] + 0.5) << i;  // the GPU's span lies within the host's wait for it
  }
}

}  // namespace
}  // namespace htm
