// Gradient summing for data-parallel training: the parameters' gradients are packed into
// buckets of about 4 MiB, and each bucket's sum over the ranks starts while backward is still
// computing earlier layers' gradients, as soon as every gradient of that bucket has been
// accumulated (autograd post-hooks on the parameters' gradient accumulators). Buckets start in
// one fixed order on every rank, as Gloo requires.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace htm {

class Communicator;

class GradientReducer {
 public:
  /// `params` in registration order; buckets are filled from the last (whose gradients backward
  /// produces first).
  /// torch's DistributedDataParallel defaults to 25 MiB buckets, sized for GPUs; the paper-size
  /// model's gradients are 22 MiB, which would make one bucket that can start only when
  /// backward has ended. 4 MiB gives six, of which `htm bench --nproc 2` measured four
  /// starting before backward ended.
  GradientReducer(std::vector<at::Tensor> params, Communicator& comm, int64_t bucket_bytes = 4 << 20);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// `loss.backward()` with the gradients summed over the ranks: buckets start as backward fills
  /// them; the rest start after it, then every parameter gets its summed gradient. A parameter
  /// no rank produced a gradient for keeps none (the optimiser skips it, exactly as a single
  /// process does); one that some ranks lack counts as zero there.
  void backward(const at::Tensor& loss);
  /// Buckets, and how many of the last step's started before backward ended.
  int64_t buckets() const;
  int64_t started_early() const;

 private:
  void prepare();
  void finish();

  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace htm
