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

torch::Tensor pca_reconstruct(const torch::Tensor& train, const torch::Tensor& test, int64_t components) {
  const int64_t D = train.size(1);
  if (components >= D) return test.clone();
  auto x = train.to(torch::kDouble);
  auto mean = x.mean(0);
  auto centred = x - mean;
  auto [values, vectors] = torch::linalg_eigh(centred.t().mm(centred));  // ascending
  auto top = vectors.narrow(1, D - components, components);              // D×k
  auto t = test.to(torch::kDouble) - mean;
  return (t.mm(top).mm(top.t()) + mean).to(test.scalar_type());
}

double ridge_accuracy(const torch::Tensor& train, const torch::Tensor& train_labels, const torch::Tensor& test,
                      const torch::Tensor& test_labels, int64_t classes, double ridge) {
  auto with_bias = [](const torch::Tensor& x) {
    return torch::cat({x.to(torch::kDouble), torch::ones({x.size(0), 1}, torch::kDouble)}, 1);
  };
  auto x = with_bias(train);
  auto targets = torch::one_hot(train_labels, classes).to(torch::kDouble);
  auto penalty = torch::eye(x.size(1), torch::kDouble) * ridge;
  penalty.index_put_({x.size(1) - 1, x.size(1) - 1}, 0.0);  // the bias is not penalised
  auto weights = torch::linalg_solve(x.t().mm(x) + penalty, x.t().mm(targets));
  auto predicted = with_bias(test).mm(weights).argmax(1);
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
  // PCA: fit rows fp32 + fp64 + centred fp64, test rows fp32 + fp64 + two fp64 products + fp32 result.
  const double pca_peak = pca ? fit * (4 + 8 + 8) + test * (4 + 8 + 8 + 8 + 4) : 0;
  const double ridge_peak = ridge ? fit * (4 + 8) + test * (4 + 8) : 0;  // fp32 rows and their fp64 design
  return std::max({pca_peak, ridge_peak, (fit + test) * 4});
}

}  // namespace htm
