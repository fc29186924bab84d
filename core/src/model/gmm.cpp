#include "model/gmm.h"

#include <armadillo>
#include <string>

#include "htm/error.h"

namespace htm {

struct GaussianMixture::Impl {
  Covariance covariance;
  arma::gmm_full full;
  arma::gmm_diag diag;
};

GaussianMixture::GaussianMixture(const std::vector<double>& points, int64_t n, int64_t d, int64_t components,
                                 Covariance covariance, uint64_t seed)
    : impl_(std::make_unique<Impl>()), d_(d) {
  if (components < 1) throw Error("a Gaussian mixture needs at least one component");
  if (n < components)
    throw Error("cannot fit " + std::to_string(components) + " Gaussians to " + std::to_string(n) + " points");
  // Armadillo is column-major: our row-major n×d is its d×n.
  arma::mat data(const_cast<double*>(points.data()), static_cast<arma::uword>(d), static_cast<arma::uword>(n),
                 /*copy_aux_mem=*/false, /*strict=*/true);
  arma::arma_rng::set_seed(seed);
  impl_->covariance = covariance;
  const auto k = static_cast<arma::uword>(components);
  const bool ok = covariance == Covariance::full
                      ? impl_->full.learn(data, k, arma::eucl_dist, arma::random_subset, 10, 100, 1e-6, false)
                      : impl_->diag.learn(data, k, arma::eucl_dist, arma::random_subset, 10, 100, 1e-6, false);
  if (!ok)
    throw Error("the Gaussian mixture's EM failed on " + std::to_string(n) + " points of dimension " +
                std::to_string(d));
}

GaussianMixture::~GaussianMixture() = default;
GaussianMixture::GaussianMixture(GaussianMixture&&) noexcept = default;

std::vector<double> GaussianMixture::sample(int64_t count, uint64_t seed) const {
  arma::arma_rng::set_seed(seed);
  const auto c = static_cast<arma::uword>(count);
  arma::mat drawn = impl_->covariance == Covariance::full ? impl_->full.generate(c) : impl_->diag.generate(c);
  return std::vector<double>(drawn.begin(), drawn.end());  // d×count column-major = row-major count×d
}

double GaussianMixture::mean_log_likelihood(const std::vector<double>& points, int64_t n) const {
  arma::mat data(const_cast<double*>(points.data()), static_cast<arma::uword>(d_), static_cast<arma::uword>(n), false,
                 true);
  return impl_->covariance == Covariance::full ? impl_->full.avg_log_p(data) : impl_->diag.avg_log_p(data);
}

}  // namespace htm
