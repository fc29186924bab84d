// The native dropout: an x-sized mask of 0 and 1/(1−p) from counter-based draws, computed on
// the CPU threads and drawn again in backward from its seed instead of being kept.
#include <cmath>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/counter_rng.h"
#include "kernels/native/native.h"

namespace htm {
namespace {

// Mask of 0 and 1/(1-p): entry n is kept iff the (first + n)-th 16-bit draw of stream `seed` is
// ≥ p·2¹⁶. Counter-based, so the mask is the same for any thread count; `first` places a
// data-parallel process's rows within the whole batch's mask (row_shard.h).
torch::Tensor keep_mask(at::IntArrayRef sizes, double p, uint64_t seed, int64_t first) {
  auto mask = torch::empty(sizes, torch::kFloat);
  float* m = mask.data_ptr<float>();
  const int64_t n = mask.numel();
  const uint32_t threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  if (first % 4 != 0) {  // not word-aligned: one draw's lane per entry
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const uint64_t g = static_cast<uint64_t>(first + e);
        m[e] = ((counter_bits(seed, g / 4) >> (16 * (g % 4))) & 0xffff) >= threshold ? scale : 0.0f;
      }
    });
    return mask;
  }
  const int64_t w0 = first / 4;
  at::parallel_for(0, (n + 3) / 4, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const uint64_t bits = counter_bits(seed, static_cast<uint64_t>(w0 + w));
      for (int64_t k = 0; k < 4 && 4 * w + k < n; ++k)
        m[4 * w + k] = ((bits >> (16 * k)) & 0xffff) >= threshold ? scale : 0.0f;
    }
  });
  return mask;
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double p, int64_t seed,
                               int64_t first) {
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["first"] = first;
    return x * keep_mask(x.sizes(), p, static_cast<uint64_t>(seed), first);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto mask = keep_mask(grad[0].sizes(), ctx->saved_data["p"].toDouble(),
                          static_cast<uint64_t>(ctx->saved_data["seed"].toInt()), ctx->saved_data["first"].toInt());
    return {grad[0] * mask, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor native::NativeBackend::dropout(const torch::Tensor& x, double p, uint64_t seed, int64_t first) const {
  return DropoutFunction::apply(x, p, static_cast<int64_t>(seed), first);
}

}  // namespace htm
