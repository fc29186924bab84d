#include "commands/bench_census.h"

#include <algorithm>
#include <cstdio>

#include <torch/torch.h>

#include "config/device.h"
#include "train/optimizer.h"
#include "train/step.h"

namespace htm::bench {

Census take_census(TrainStep& train_step, const c10::Device& device, const std::function<void()>& step) {
  Census c;
  const std::vector<const FusedAdamW*> optimizers{&train_step.optimizer(), &train_step.policy_optimizer()};
  for (const FusedAdamW* o : optimizers) {
    c.moment_bytes += o->state_bytes();
    for (const auto& p : o->params()) {
      c.param_bytes += p.nbytes();
      if (p.grad().defined()) c.old_grad_bytes += p.grad().nbytes();
    }
  }
  if (device.is_cuda() && gpu_memory_stats_built()) c.gpu_before_mib = gpu_peaks(device).now;
  MemoryCensus count(device.str());
  train_step.phase_ended = [&] { count.next_phase(); };
  step();
  train_step.phase_ended = nullptr;
  c.sites = count.at_peak();
  c.phase = count.phase_at_peak();
  c.freed = count.freed_earlier_at_peak();
  // The step drops the last step's gradients first: where the allocator did not say so (a
  // CPU's), they are taken off here.
  c.peak = count.peak_bytes() - (c.freed > 0 ? 0 : c.old_grad_bytes);
  std::vector<const void*> grads;
  for (const FusedAdamW* o : optimizers)
    for (const auto& p : o->params())
      if (p.grad().defined()) grads.push_back(p.grad().storage().data());
  c.grads = count.at_peak_among(grads);
  return c;
}

void print_census(const std::string& what, const Census& c) {
  constexpr double kMiB = 1024.0 * 1024.0;
  static const char* const phases[] = {"forward", "backward", "the optimiser"};
  const double kept_mib = (c.param_bytes + c.moment_bytes + c.old_grad_bytes) / kMiB;
  std::printf(
      "census   %-28s before the step: parameters %.1f MiB, their AdamW moments %.1f MiB, the last step's "
      "gradients %.1f MiB (dropped as the step begins)",
      what.c_str(), c.param_bytes / kMiB, c.moment_bytes / kMiB, c.old_grad_bytes / kMiB);
  if (c.gpu_before_mib >= 0)
    std::printf("; the GPU's allocated %.1f MiB in all (%.1f MiB else: workspaces, buffers, the batch)",
                c.gpu_before_mib, c.gpu_before_mib - kept_mib);
  std::printf("\n");
  int64_t made = 0;
  for (const auto& site : c.sites) made += site.bytes;
  const double before_mib = c.gpu_before_mib >= 0 ? c.gpu_before_mib : kept_mib;
  std::printf(
      "census   %-28s one eager step's peak, in %s: %.1f MiB above where the step began, %.1f MiB of tensors in "
      "all (%s); %.1f MiB of tensors it made alive at once (of them, its own gradients %.1f MiB), ",
      what.c_str(), phases[std::min(c.phase, 2)], c.peak / kMiB, before_mib + c.peak / kMiB,
      c.gpu_before_mib >= 0 ? "with all the GPU had allocated before it"
                            : "with the parameters, moments and last gradients before it",
      made / kMiB, c.grads / kMiB);
  if (c.freed > 0)
    std::printf("less %.1f MiB made before it and freed by then", c.freed / kMiB);
  else
    std::printf("less the last step's gradients (freed first; this allocator does not report it)");
  std::printf("; at that moment, by where they were made:\n");
  int64_t rest = 0;
  for (size_t i = 0; i < c.sites.size(); ++i) {
    if (i < 20)
      std::printf("census   %9.1f MiB  %s\n", c.sites[i].bytes / kMiB, c.sites[i].where.c_str());
    else
      rest += c.sites[i].bytes;
  }
  if (rest > 0) std::printf("census   %9.1f MiB  %zu other sites\n", rest / kMiB, c.sites.size() - 20);
}

}  // namespace htm::bench
