// The native AdamW update: one pass over a parameter's floats (kernels/kernels.h: AdamWStep).
#include <cmath>

#include <torch/torch.h>

#include "kernels/native/native.h"

namespace htm {

void native::adamw_update(torch::Tensor& param, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                          const torch::Tensor& grad, const AdamWStep& s) {
  float* p = param.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  const int64_t n = param.numel();
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= s.decay;
    m[i] = s.beta1 * m[i] + s.rest1 * g[i];
    v[i] = s.beta2 * v[i] + s.rest2 * g[i] * g[i];
    p[i] -= s.step_size * m[i] / (std::sqrt(v[i]) / s.root_bias2 + s.eps);
  }
}

}  // namespace htm
