#include "train/baselines.h"

#include <algorithm>

#include <torch/torch.h>

#include "htm/dataset.h"
#include "model/model.h"

namespace htm {
namespace {

constexpr int64_t kChunk = 4096;
constexpr int64_t kFitRows = 20000;  // PCA and the ridge classifier: plenty for ≤ 3072 dimensions

// The first `keep` of a split's first `n` samples (inputs, and labels when it has them), and
// the mean input over all n, read in chunks so that only `keep` samples are ever held.
struct SplitRows {
  torch::Tensor inputs, labels, mean;
};
SplitRows read_split(const Dataset& data, Split split, int64_t n, int64_t keep) {
  std::vector<torch::Tensor> inputs, labels;
  torch::Tensor sum;
  for (int64_t i = 0; i < n; i += kChunk) {
    Batch batch = data.get(split, torch::arange(i, std::min(n, i + kChunk)));
    sum = sum.defined() ? sum + batch.input.sum(0) : batch.input.sum(0);
    const int64_t kept = std::min<int64_t>(batch.input.size(0), keep - i);
    if (kept <= 0) continue;
    inputs.push_back(batch.input.narrow(0, 0, kept));
    if (batch.labels.defined()) labels.push_back(batch.labels.narrow(0, 0, kept));
  }
  return {torch::cat(inputs), labels.empty() ? torch::Tensor() : torch::cat(labels), sum / static_cast<double>(n)};
}

}  // namespace

// Fewer rows than dimensions (N < D: a short run on CIFAR-10's 3072) span at most N - 1
// directions, so both fits take the N×N Gram matrix instead of the D×D scatter: the same answer
// in milliseconds instead of a 3072×3072 eigendecomposition or solve (~15 s on one core).
torch::Tensor pca_reconstruct(const torch::Tensor& train, const torch::Tensor& test, int64_t components) {
  const int64_t N = train.size(0), D = train.size(1);
  if (components >= D) return test.clone();
  auto x = train.to(torch::kDouble);
  auto mean = x.mean(0);
  auto centred = x - mean;
  torch::Tensor top;  // D×k, orthonormal
  if (N < D) {
    // Directions of zero variance lie outside the rows' span and are left out: there any
    // choice is arbitrary, and the span's own directions are the reconstruction's.
    auto [values, vectors] = torch::linalg_eigh(centred.mm(centred.t()));  // ascending
    const double floor = 1e-10 * std::max(values[-1].item<double>(), 1e-300);
    const int64_t k = std::min(components, (values > floor).sum().item<int64_t>());
    top = centred.t().mm(vectors.narrow(1, N - k, k)) / values.narrow(0, N - k, k).sqrt();
  } else {
    auto [values, vectors] = torch::linalg_eigh(centred.t().mm(centred));  // ascending
    top = vectors.narrow(1, D - components, components);
  }
  auto t = test.to(torch::kDouble) - mean;
  return (t.mm(top).mm(top.t()) + mean).to(test.scalar_type());
}

double ridge_accuracy(const torch::Tensor& train, const torch::Tensor& train_labels, const torch::Tensor& test,
                      const torch::Tensor& test_labels, int64_t classes, double ridge) {
  // The bias is not penalised: it is the centred fit's offset, and the weights solve
  // (XᵀX + ridge·I) w = XᵀY on the centred rows, or equally w = Xᵀ (XXᵀ + ridge·I)⁻¹ Y.
  auto x = train.to(torch::kDouble), mean = x.mean(0);
  auto targets = torch::one_hot(train_labels, classes).to(torch::kDouble);
  auto target_mean = targets.mean(0);
  auto xc = x - mean, yc = targets - target_mean;
  const int64_t N = x.size(0), D = x.size(1);
  auto weights = N < D ? xc.t().mm(torch::linalg_solve(xc.mm(xc.t()) + torch::eye(N, torch::kDouble) * ridge, yc))
                       : torch::linalg_solve(xc.t().mm(xc) + torch::eye(D, torch::kDouble) * ridge, xc.t().mm(yc));
  auto predicted = ((test.to(torch::kDouble) - mean).mm(weights) + target_mean).argmax(1);
  return (predicted == test_labels).to(torch::kDouble).mean().item<double>();
}

BaselineScores baseline_scores(const Dataset& data, Model& model, int64_t n_train, int64_t n_test,
                               int64_t pca_components) {
  torch::NoGradGuard no_grad;
  BaselineScores s;
  const SplitRows train = read_split(data, Split::train, n_train, kFitRows);
  const SplitRows test = read_split(data, Split::test, n_test, n_test);
  auto error = [&](const torch::Tensor& rows) {  // mean reconstruction error of N×D predictions
    return model.reconstruction_error(rows.view(test.inputs.sizes()).contiguous(), test.inputs).mean().item<double>();
  };
  auto fit_rows = train.inputs.flatten(1), test_rows = test.inputs.flatten(1);
  s.mean_mse = error(train.mean.reshape({1, -1}).expand_as(test_rows));
  const bool images = data.sample_shape().size() == 3;  // PCA of a set depends on its order
  if (images && pca_components > 0) {
    s.pca_components = std::min(pca_components, fit_rows.size(1));
    s.pca_mse = error(pca_reconstruct(fit_rows, test_rows, pca_components));
  }
  if (data.num_classes() > 1 && train.labels.defined() && test.labels.defined())
    s.linear_accuracy = ridge_accuracy(fit_rows, train.labels, test_rows, test.labels, data.num_classes());
  return s;
}

double baseline_bytes(const Dataset& data, int64_t n_train, int64_t n_test, int64_t pca_components) {
  double features = 1;
  for (int64_t d : data.sample_shape()) features *= static_cast<double>(d);
  const double fit = static_cast<double>(std::min(n_train, kFitRows)) * features;
  const double test = static_cast<double>(n_test) * features;
  const bool pca = data.sample_shape().size() == 3 && pca_components > 0;
  const bool ridge = data.num_classes() > 1;
  // PCA: fit rows fp32 + fp64 + centred fp64, test rows fp32 + fp64 + two fp64 products + fp32 result,
  // their projection (test rows × components, fp64) and the eigenproblem's matrix, vectors and
  // workspace (the smaller of D×D and N×N, fp64, three of them).
  const double rows = static_cast<double>(std::min(n_train, kFitRows));
  const double components = std::min(static_cast<double>(pca_components), features);
  const double square = std::min(features, rows);
  const double pca_peak = pca ? fit * (4 + 8 + 8) + test * (4 + 8 + 8 + 8 + 4) +
                                    static_cast<double>(n_test) * components * 8 + square * square * 8 * 3
                              : 0;
  const double ridge_peak = ridge ? fit * (4 + 8 + 8) + test * (4 + 8 + 8) : 0;  // fp32 rows, fp64, centred fp64
  return std::max({pca_peak, ridge_peak, (fit + test) * 4});
}

}  // namespace htm
