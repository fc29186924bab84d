// The state a CUDA graph's capture shares with the kernels (train/step_graph.h,
// train/eval_graph.h): whether this thread draws as a graph can replay, the checks a kernel could
// not make on the host during a capture, the pair sampler's fixed rounds, the constants a step
// keeps on its device, and the seeds of one call's draws. Kept apart from the operations
// (kernels/backend.h): a backend reads it, the trainer sets it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace htm {

/// While one lives on this thread, the gpu backend draws as a CUDA graph can replay them (a
/// training step under runtime.cuda_graph, train/step_graph.h): every draw on a GPU comes from the
/// device's default generator as it stands (the step seeds it once), with no per-call seed and no
/// draw of the run's CPU generator. With `fixed_rounds` (a capture) the pair sampler also runs a
/// fixed number of rounds with no read-back, raising a device flag (take_graph_flags()) where
/// they did not finish the matching (none where they cannot fall short: ⌊T/2⌋ rounds); given the
/// same noise it takes the same pairs either way.
class GraphDraws {
 public:
  explicit GraphDraws(bool fixed_rounds = false);
  ~GraphDraws();
  GraphDraws(const GraphDraws&) = delete;
  GraphDraws& operator=(const GraphDraws&) = delete;

 private:
  bool previous_, previous_fixed_;
};

/// A check a kernel could not make on the host under GraphDraws: `raised` (a bool scalar on the
/// device) is true where it failed, and `what` says what failed.
struct GraphFlag {
  at::Tensor raised;
  std::string what;
};

/// Whether a GraphDraws with fixed rounds (a capture: nothing may be read from or copied off the
/// host) lives on this thread.
bool capturing();
/// Whether a GraphDraws lives on this thread (runtime.cuda_graph "on" or "eager": a step or an
/// evaluation that draws, and reads, as a graph can).
bool drawing_as_graph();

/// Keeps a flag for the next take_graph_flags() on this thread.
void raise_graph_flag(GraphFlag flag);
/// This thread's flags raised since the last take_graph_flags(), which hands them over.
std::vector<GraphFlag> take_graph_flags();

/// The rounds the pair sampler runs with fixed rounds (a capture) at T tokens: ⌊T/2⌋, which always
/// finish the matching (each round matches at least the best pair left), or the cap set by
/// set_graph_rounds_cap() (runtime.graph_rounds) where that is fewer. Random logits finish in
/// about 2·log₂ T rounds, but a trained policy's logits make a few tokens everyone's best
/// partner, and its matchings then take nearly ⌊T/2⌋ (results/sampler-rounds-cpu-2026-11-28.csv).
int64_t graph_rounds(int64_t T);
/// The most rounds a captured sampler runs (0: ⌊T/2⌋); for the whole process.
void set_graph_rounds_cap(int64_t cap);

/// A constant tensor of `device` (an index table, a mask), made by `make` once per (what, n,
/// device) and kept for the process: a step's constants cost no launches after its first. One
/// first made inside a capture (capturing()) is returned but not kept, its memory being the
/// graph's; the eager steps before a capture make them.
at::Tensor device_constant(const std::string& what, int64_t n, const at::Device& device,
                           const std::function<at::Tensor()>& make);

/// A generator on `device` seeded with `seed` (on CUDA: Philox, offset 0).
at::Generator seeded_generator(uint64_t seed, const at::Device& device);

/// A seed for one call's draws: the next 64 bits of `generator` (a run's CPU generator, or
/// torch's global one for the dropout streams: kernels.cpp).
uint64_t next_seed(at::Generator generator);

}  // namespace htm
