// The pair sampler's exact log-probability (sampling.cpp's pair_log_prob, form "exact") on the CPU
// as one autograd node: the host parts of kernels/pair_log_prob.h (the CUDA kernels' parts one
// after another, lanes 1) forward and backward, where the reference takes about twenty torch ops
// each way (a B×T×T double exp, the B×r×T unused-token indicator, a batched product, …). The sums
// are the reference's in another order, in double; the float results agree to rounding
// (tests/pair_log_prob_test.cpp, PairLogProb.TheNativeNodeGivesTheTorchOpsValuesAndGradients; the
// golden digests did not move). Kept for backward: the masked logits, the pairs, the
// normalisers and the largest logit.
#include <cmath>
#include <vector>

#include <torch/torch.h>

#include "kernels/native/native.h"
#include "kernels/pair_log_prob.h"

namespace htm {
namespace {

// A sample's weights exp(m_ij − top) once each (logprob::weight: the same bits), where the
// host parts compute one up to five times (a draw's level sums read each pair of its tokens).
void weights_of(const float* m, int64_t T, float top, double* w) {
  for (int64_t flat = 0; flat < T * T; ++flat) w[flat] = logprob::weight(m, T, flat / T, flat % T, top);
}

// logprob::log_prob_on_host with lanes 1, from the weights' table: the same sums in the same order.
void forward_on_host(const float* masked, const int64_t* src, const int64_t* dst, int64_t B, int64_t T, int64_t r,
                     float* out, double* Z, float* top) {
  std::vector<int32_t> taken(T);
  std::vector<double> H(r + 1), w(T * T);
  for (int64_t b = 0; b < B; ++b) {
    const float* m = masked + b * T * T;
    const int64_t *s = src + b * r, *d = dst + b * r;
    float t = -INFINITY;
    for (int64_t flat = 0; flat < T * T; ++flat) t = logprob::larger(t, m[flat]);
    weights_of(m, T, t, w.data());
    for (int64_t u = 0; u < T; ++u) taken[u] = static_cast<int32_t>(r);
    for (int64_t k = 0; k < r; ++k) logprob::mark_taken(s, d, k, taken.data());
    for (int64_t l = 0; l < r; ++l) {  // level_partial
      const int64_t sl = s[l], dl = d[l];
      double sum = 0;
      for (int64_t u = 0; u < T; ++u) {
        if (taken[u] < l) continue;
        if (u != sl) sum += w[sl * T + u] + w[u * T + sl];
        if (u != dl && u != sl) sum += w[dl * T + u] + w[u * T + dl];
      }
      H[l] = 0.0 + sum;
    }
    double rest = 0;  // rest_partial
    for (int64_t flat = 0; flat < T * T; ++flat) {
      const int64_t i = flat / T, j = flat % T;
      if (i != j && taken[i] == r && taken[j] == r) rest += w[flat];
    }
    H[r] = rest;
    logprob::suffix_sums(H.data(), r);
    for (int64_t k = 0; k < r; ++k) {
      Z[b * r + k] = H[k];
      out[b * r + k] = logprob::log_prob(m[s[k] * T + d[k]], H[k], t);
    }
    top[b] = t;
  }
}

// logprob::grad_on_host, each weight once.
void backward_on_host(const float* g, const float* masked, const int64_t* src, const int64_t* dst, const double* Z,
                      const float* top, int64_t B, int64_t T, int64_t r, float* grad) {
  std::vector<int32_t> taken(T);
  std::vector<double> S(r + 1);
  for (int64_t b = 0; b < B; ++b) {
    const float* m = masked + b * T * T;
    const int64_t *s = src + b * r, *d = dst + b * r;
    for (int64_t u = 0; u < T; ++u) taken[u] = static_cast<int32_t>(r);
    for (int64_t k = 0; k < r; ++k) logprob::mark_taken(s, d, k, taken.data());
    logprob::prefix_sums(g + b * r, Z + b * r, r, S.data());
    float* out = grad + b * T * T;
    for (int64_t flat = 0; flat < T * T; ++flat)
      out[flat] = logprob::spread(m, T, top[b], taken.data(), S.data(), flat);
    for (int64_t k = 0; k < r; ++k) out[s[k] * T + d[k]] += g[b * r + k];
  }
}

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
    forward_on_host(m.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(), B, T, r, out.data_ptr<float>(),
                    Z.data_ptr<double>(), top.data_ptr<float>());
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
    backward_on_host(g.data_ptr<float>(), m.data_ptr<float>(), s.data_ptr<int64_t>(), d.data_ptr<int64_t>(),
                     Z.data_ptr<double>(), top.data_ptr<float>(), B, T, r, grad.data_ptr<float>());
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
