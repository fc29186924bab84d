// The pair sampler's exact log-probability (sampling.cpp's pair_log_prob, form "exact") on the CPU
// as one autograd node: the host parts of kernels/pair_log_prob.h (the CUDA kernels' parts one
// after another, lanes 1) forward and backward, where the reference takes about twenty torch ops
// each way (a B×T×T double exp, the B×r×T unused-token indicator, a batched product, …). The sums
// are the reference's in another order, in double; the float results agree to rounding
// (tests/native_log_prob_test.cpp). Kept for backward: the masked logits, the pairs, the
// normalisers and the largest logit.
#include <vector>

#include <torch/torch.h>

#include "kernels/native/native.h"
#include "kernels/pair_log_prob.h"

namespace htm {
namespace {

class PairLogProbNode : public torch::autograd::Function<PairLogProbNode> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& masked,
                               const torch::Tensor& src, const torch::Tensor& dst) {
    const int64_t B = masked.size(0), T = masked.size(1), r = src.size(1);
    auto m = masked.contiguous();
    auto s = src.contiguous(), d = dst.contiguous();
    auto out = torch::empty({B, r}, m.options());
    auto Z = torch::empty({B, r}, m.options().dtype(torch::kDouble));
    auto top = torch::empty({B}, m.options());
    std::vector<int32_t> taken(T);
    std::vector<double> H(r + 1);
    logprob::log_prob_on_host(m.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(), B, T, r,
                              out.data_ptr<float>(), Z.data_ptr<double>(), top.data_ptr<float>(), taken.data(),
                              H.data(), 1);
    ctx->save_for_backward({m, s, d, Z, top});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &m = saved[0], &s = saved[1], &d = saved[2], &Z = saved[3], &top = saved[4];
    const int64_t B = m.size(0), T = m.size(1), r = s.size(1);
    const auto g = grads[0].to(torch::kFloat).contiguous();
    auto grad = torch::empty_like(m);
    std::vector<int32_t> taken(T);
    std::vector<double> S(r + 1);
    logprob::grad_on_host(g.data_ptr<float>(), m.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(),
                          Z.data_ptr<double>(), top.data_ptr<float>(), B, T, r, grad.data_ptr<float>(), taken.data(),
                          S.data());
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

// Whether the node takes this call: float logits B×T×T on the CPU, 1 ≤ r ≤ T/2 int64 pairs.
bool node_takes(const torch::Tensor& masked, const torch::Tensor& src, const torch::Tensor& dst) {
  if (masked.dim() != 3 || src.dim() != 2 || dst.sizes() != src.sizes()) return false;
  const int64_t T = masked.size(1), r = src.size(1);
  return masked.device().is_cpu() && masked.scalar_type() == torch::kFloat && masked.size(2) == T &&
         T <= logprob::kMaxTokens && r >= 1 && 2 * r <= T && src.size(0) == masked.size(0) &&
         src.scalar_type() == torch::kLong && dst.scalar_type() == torch::kLong;
}

}  // namespace

torch::Tensor native::NativeBackend::pair_log_prob(const torch::Tensor& masked, const torch::Tensor& src,
                                                   const torch::Tensor& dst) const {
  if (!node_takes(masked, src, dst)) return Backend::pair_log_prob(masked, src, dst);
  return PairLogProbNode::apply(masked, src, dst);
}

}  // namespace htm
