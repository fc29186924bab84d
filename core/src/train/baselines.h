// Cheap references every run is measured against: the mean training sample, PCA with the same
// number of latent floats as the model's bottleneck, and a linear classifier on the raw input.
#pragma once

#include <cstdint>
#include <limits>

#include <ATen/core/Tensor.h>

namespace htm {

class Dataset;
class Model;

/// The test rows (N×D) projected onto the top `components` principal directions of the train
/// rows (M×D) and mapped back: the best rank-k linear reconstruction. components ≥ D returns
/// the test rows unchanged.
at::Tensor pca_reconstruct(const at::Tensor& train, const at::Tensor& test, int64_t components);

/// Test accuracy of a ridge-regression classifier (one-hot targets, bias, penalty `ridge` on
/// the weights) fitted on the train rows: the linear classifier a network must beat.
double ridge_accuracy(const at::Tensor& train, const at::Tensor& train_labels, const at::Tensor& test,
                      const at::Tensor& test_labels, int64_t classes, double ridge = 1.0);

struct BaselineScores {
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  double mean_mse = 0;   ///< error of predicting the mean training sample
  double pca_mse = nan;  ///< error of PCA with `pca_components` components (images only)
  int64_t pca_components = 0;
  double linear_accuracy = nan;  ///< ridge classifier on the raw input (labelled data only)
};

/// The references on the first `n_train` training and `n_test` test samples. Errors are
/// measured by the model's own reconstruction_error, as its outputs are. pca_components: the
/// bottleneck's float count (0: no PCA reference).
BaselineScores baseline_scores(const Dataset& data, Model& model, int64_t n_train, int64_t n_test,
                               int64_t pca_components);
/// The most memory baseline_scores() holds at once, in bytes, counted from its own tensors: the
/// fitted rows in fp32, their fp64 copy and centred copy for PCA (or the ridge's fp64 design),
/// and the test rows with PCA's fp64 projection, reconstruction and eigenproblem.
double baseline_bytes(const Dataset& data, int64_t n_train, int64_t n_test, int64_t pca_components);

}  // namespace htm
