// The Gaussian mixture behind generation (core/src/gmm.h, Armadillo's EM).
#include <cmath>
#include <random>

#include "htm/error.h"
#include "model/gmm.h"
#include "test_util.h"

namespace htm {
namespace {

// 600 points in 2-D: two clusters, at (-3, 0) with sd 0.5 and at (3, 1) with sd 0.2, 2:1.
std::vector<double> two_clusters() {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> z(0, 1);
  std::vector<double> points;
  for (int i = 0; i < 600; ++i) {
    if (i % 3 != 2)
      points.insert(points.end(), {-3 + 0.5 * z(rng), 0.5 * z(rng)});
    else
      points.insert(points.end(), {3 + 0.2 * z(rng), 1 + 0.2 * z(rng)});
  }
  return points;
}

TEST(GaussianMixture, SamplesFollowTheFittedClusters) {
  for (auto covariance : {Covariance::full, Covariance::diagonal}) {
    GaussianMixture gmm(two_clusters(), 600, 2, 2, covariance, 0);
    const auto drawn = gmm.sample(3000, 1);
    ASSERT_EQ(drawn.size(), 6000u);
    int right = 0;
    double right_y = 0;
    for (size_t i = 0; i < 3000; ++i) {
      if (drawn[2 * i] > 0) {
        ++right;
        right_y += drawn[2 * i + 1];
      }
    }
    EXPECT_NEAR(right / 3000.0, 1.0 / 3, 0.04);  // the mixture weights
    EXPECT_NEAR(right_y / right, 1.0, 0.05);     // the right cluster's mean
    // The fitted mixture explains its data far better than one Gaussian would (≈ -3.4).
    EXPECT_GT(gmm.mean_log_likelihood(two_clusters(), 600), -2.5);
  }
}

TEST(GaussianMixture, SameSeedSameDraws) {
  GaussianMixture a(two_clusters(), 600, 2, 2, Covariance::full, 7);
  GaussianMixture b(two_clusters(), 600, 2, 2, Covariance::full, 7);
  EXPECT_EQ(a.sample(10, 3), b.sample(10, 3));
  EXPECT_NE(a.sample(10, 3), a.sample(10, 4));
}

TEST(GaussianMixture, TooFewPointsIsAnError) {
  EXPECT_THROW(GaussianMixture({0, 0, 1, 1}, 2, 2, 3, Covariance::full, 0), Error);
}

}  // namespace
}  // namespace htm
