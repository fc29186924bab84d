#include "baselines.h"

#include <algorithm>

#include <torch/torch.h>

#include "htm/dataset.h"
#include "model.h"

namespace htm {
namespace {

constexpr int64_t kChunk = 4096;
constexpr int64_t kFitRows = 20000;  // PCA and the ridge classifier: plenty for ≤ 3072 dimensions

// Rows of a split, as N×sample_shape inputs and N labels (undefined when unlabelled).
std::pair<torch::Tensor, torch::Tensor> read_split(const Dataset& data, Split split, int64_t n) {
  std::vector<torch::Tensor> inputs, labels;
  for (int64_t i = 0; i < n; i += kChunk) {
    Batch batch = data.get(split, torch::arange(i, std::min(n, i + kChunk)));
    inputs.push_back(batch.input);
    if (batch.labels.defined()) labels.push_back(batch.labels);
  }
  return {torch::cat(inputs), labels.empty() ? torch::Tensor() : torch::cat(labels)};
}

}  // namespace

torch::Tensor pca_reconstruct(const torch::Tensor& train, const torch::Tensor& test, int64_t components) {
  const int64_t D = train.size(1);
  if (components >= D) return test.clone();
  auto x = train.to(torch::kDouble);
  auto mean = x.mean(0);
  auto centred = x - mean;
  auto [values, vectors] = torch::linalg_eigh(centred.t().mm(centred));  // ascending
  auto top = vectors.narrow(1, D - components, components);                // D×k
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
  auto [train, train_labels] = read_split(data, Split::train, n_train);
  auto [test, test_labels] = read_split(data, Split::test, n_test);
  auto error = [&](const torch::Tensor& rows) {  // mean reconstruction error of N×D predictions
    return model.reconstruction_error(rows.view(test.sizes()).contiguous(), test).mean().item<double>();
  };
  auto train_rows = train.flatten(1), test_rows = test.flatten(1);
  s.mean_mse = error(train_rows.mean(0, true).expand_as(test_rows));
  auto fit_rows = train_rows.narrow(0, 0, std::min<int64_t>(kFitRows, train_rows.size(0)));
  const bool images = data.sample_shape().size() == 3;  // PCA of a set depends on its order
  if (images && pca_components > 0) {
    s.pca_components = std::min(pca_components, fit_rows.size(1));
    s.pca_mse = error(pca_reconstruct(fit_rows, test_rows, pca_components));
  }
  if (data.num_classes() > 1 && train_labels.defined() && test_labels.defined())
    s.linear_accuracy = ridge_accuracy(fit_rows, train_labels.narrow(0, 0, fit_rows.size(0)), test_rows, test_labels, data.num_classes());
  return s;
}

}  // namespace htm
