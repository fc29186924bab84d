// A Gaussian mixture over root embeddings, for generation (paper A.1, HTM slides). The EM is
// Armadillo's (gmm_full / gmm_diag); this header keeps Armadillo out of everything else.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace htm {

enum class Covariance { full, diagonal };

class GaussianMixture {
 public:
  /// Fits `components` Gaussians to n points of dimension d (row-major n×d) by k-means
  /// initialisation then EM, seeded by `seed`. Throws htm::Error when the fit fails or there
  /// are fewer points than components.
  GaussianMixture(const std::vector<double>& points, int64_t n, int64_t d, int64_t components, Covariance covariance,
                  uint64_t seed);
  ~GaussianMixture();
  GaussianMixture(GaussianMixture&&) noexcept;

  /// `count` points drawn from the mixture (row-major count×d), seeded.
  std::vector<double> sample(int64_t count, uint64_t seed) const;
  /// Mean log-likelihood per point of row-major n×d `points` under the mixture.
  double mean_log_likelihood(const std::vector<double>& points, int64_t n) const;
  int64_t dim() const { return d_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t d_ = 0;
};

}  // namespace htm
