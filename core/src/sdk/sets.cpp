#include "htm/sets.h"

#include <cmath>
#include <limits>
#include <string>

#include <torch/torch.h>

#include "htm/error.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"

namespace htm {

void hungarian_into(const double* cost, int64_t n, HungarianWork& w, int64_t* assignment) {
  for (int64_t k = 0; k < n * n; ++k)
    if (!std::isfinite(cost[k])) throw NonFinite("the matching costs hold NaN or infinity");
  // Potentials u (rows), v (columns); p[j] is the row matched to column j (1-based, 0 = none).
  const double inf = std::numeric_limits<double>::infinity();
  w.u.assign(n + 1, 0), w.v.assign(n + 1, 0), w.minv.resize(n + 1);
  w.p.assign(n + 1, 0), w.way.assign(n + 1, 0), w.used.resize(n + 1);
  double *u = w.u.data(), *v = w.v.data(), *minv = w.minv.data();
  int64_t *p = w.p.data(), *way = w.way.data();
  char* used = w.used.data();
  for (int64_t i = 1; i <= n; ++i) {
    p[0] = i;
    int64_t j0 = 0;
    std::fill(minv, minv + n + 1, inf);
    std::fill(used, used + n + 1, char{0});
    do {
      used[j0] = 1;
      const int64_t i0 = p[j0];
      const double* row = cost + (i0 - 1) * n - 1;  // row[j], j = 1..n
      double delta = inf;
      int64_t j1 = 0;
      for (int64_t j = 1; j <= n; ++j) {
        if (used[j]) continue;
        const double cur = row[j] - u[i0] - v[j];
        if (cur < minv[j]) minv[j] = cur, way[j] = j0;
        if (minv[j] < delta) delta = minv[j], j1 = j;
      }
      for (int64_t j = 0; j <= n; ++j) {
        if (used[j])
          u[p[j]] += delta, v[j] -= delta;
        else
          minv[j] -= delta;
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {  // augment along the alternating path
      const int64_t j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::fill(assignment, assignment + n, int64_t{-1});
  for (int64_t j = 1; j <= n; ++j)
    if (p[j] > 0) assignment[p[j] - 1] = j - 1;
}

std::vector<int64_t> hungarian(const std::vector<double>& cost, int64_t n) {
  if (static_cast<int64_t>(cost.size()) != n * n) throw Error("hungarian: cost is not n×n");
  HungarianWork work;
  std::vector<int64_t> assignment(n);
  hungarian_into(cost.data(), n, work, assignment.data());
  return assignment;
}

namespace {

void check_sets(const at::Tensor& prediction, const at::Tensor& target, const char* what) {
  if (prediction.dim() != 3 || prediction.sizes() != target.sizes())
    throw Error(std::string(what) + ": prediction and target must be B×N×F, got " + c10::str(prediction.sizes()) +
                " and " + c10::str(target.sizes()));
}

}  // namespace

at::Tensor match_sets(const at::Tensor& prediction, const at::Tensor& target) {
  check_sets(prediction, target, "match_sets");
  torch::NoGradGuard no_grad;
  auto cost = torch::cdist(prediction.detach().to(torch::kDouble), target.to(torch::kDouble)).pow(2);
  // The gpu backend matches small sets on the device, with no read-back (a CUDA graph can hold
  // it); the reference runs the Hungarian method on the host, whatever the device.
  return backend_for(prediction).min_cost_assignment(cost);
}

at::Tensor matched_mse(const at::Tensor& prediction, const at::Tensor& target) {
  auto index = match_sets(prediction, target);
  auto matched = target.gather(1, index.unsqueeze(-1).expand_as(target));
  return (prediction - matched).pow(2).mean({1, 2});
}

at::Tensor chamfer(const at::Tensor& prediction, const at::Tensor& target) {
  check_sets(prediction, target, "chamfer");
  // |a-b|² = |a|² + |b|² - 2ab: no B×N×N×F intermediate.
  auto d2 = (prediction.pow(2).sum(-1).unsqueeze(2) + target.pow(2).sum(-1).unsqueeze(1) -
             2 * torch::bmm(prediction, target.transpose(1, 2)))
                .clamp_min(0);
  auto forward = std::get<0>(d2.min(2)).mean(1);
  auto backward = std::get<0>(d2.min(1)).mean(1);
  return 0.5 * (forward + backward) / static_cast<double>(prediction.size(2));
}

}  // namespace htm
