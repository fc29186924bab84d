// The native AdamW update: one pass over a parameter's floats (kernels/kernels.h: AdamWStep).
#include <cmath>

#include <torch/torch.h>

#include "kernels/native/native.h"

namespace htm {

void native::NativeBackend::adamw_update(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& exp_avg,
                                         std::vector<torch::Tensor>& exp_avg_sq,
                                         const std::vector<torch::Tensor>& grads, const AdamWStep& s) const {
  for (size_t k = 0; k < params.size(); ++k) {
    float* p = params[k].data_ptr<float>();
    float* m = exp_avg[k].data_ptr<float>();
    float* v = exp_avg_sq[k].data_ptr<float>();
    const float* g = grads[k].data_ptr<float>();
    const int64_t n = params[k].numel();
    for (int64_t i = 0; i < n; ++i) {
      p[i] *= s.decay;
      m[i] = s.beta1 * m[i] + s.rest1 * g[i];
      v[i] = s.beta2 * v[i] + s.rest2 * g[i] * g[i];
      p[i] -= s.step_size * m[i] / (std::sqrt(v[i]) / s.root_bias2 + s.eps);
    }
  }
}

}  // namespace htm
