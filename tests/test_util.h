// Helpers shared by the test suites.
#pragma once

#include <ftw.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fstream>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "htm/error.h"

namespace htm::testing {

/// The message of the htm::Error that `action` throws; a test failure when it throws none.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an htm::Error";
  return "";
}

/// Removes a folder and everything under it, if it exists. Not std::filesystem::remove_all: a
/// pip-installed libtorch (2.11, CUDA 13) exports its own copy of that function, which the
/// dynamic linker may bind in place of libstdc++'s, and it crashes (docs/gpu.md).
inline void remove_tree(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return;
  nftw(
      dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

/// Where the fashion_mnist plugin reads by default ($HTM_FASHION_MNIST, else Debian's folder),
/// and whether its training images are there.
inline std::string fashion_mnist_folder() {
  const char* root = std::getenv("HTM_FASHION_MNIST");
  return root != nullptr && *root != '\0' ? root : "/usr/share/datasets/fashion-mnist";
}
inline bool fashion_mnist_here() {
  std::error_code ec;
  return std::filesystem::exists(fashion_mnist_folder() + "/train-images-idx3-ubyte.gz", ec) ||
         std::filesystem::exists(fashion_mnist_folder() + "/train-images-idx3-ubyte", ec);
}

/// A test that trains on Fashion-MNIST skips, saying why, on a machine without it.
#define HTM_SKIP_WITHOUT_FASHION_MNIST()                                                  \
  if (!htm::testing::fashion_mnist_here())                                                \
  GTEST_SKIP() << "skipped: no Fashion-MNIST in " << htm::testing::fashion_mnist_folder() \
               << " (install Debian's dataset-fashion-mnist or set HTM_FASHION_MNIST to its folder)"

/// A fresh empty folder under the test temp dir, unique per test.
inline std::string fresh_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::path(::testing::TempDir()) / "htm" /
             (std::string(info->test_suite_name()) + "." + info->name() + "." + name);
  remove_tree(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

/// Pearson chi-square statistic of observed counts against expected probabilities, pooling
/// cells with expectation below 5 into one. Returns {statistic, degrees of freedom}.
inline std::pair<double, int> chi_square(const std::vector<double>& counts, const std::vector<double>& probs,
                                         double n) {
  double stat = 0, pooled_obs = 0, pooled_exp = 0;
  int cells = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const double e = probs[k] * n;
    if (e < 5) {
      pooled_obs += counts[k];
      pooled_exp += e;
      continue;
    }
    stat += (counts[k] - e) * (counts[k] - e) / e;
    ++cells;
  }
  if (pooled_exp > 0) {
    stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++cells;
  }
  return {stat, cells - 1};
}

/// Writes CIFAR-10 binary files (data_batch_1.bin with `train` records, test_batch.bin with
/// `test`): record k has label k % 10 and every pixel byte equal to (7k + channel) % 256.
inline void write_tiny_cifar(const std::string& dir, int train, int test) {
  auto write = [](const std::string& path, int n) {
    std::ofstream out(path, std::ios::binary);
    for (int k = 0; k < n; ++k) {
      out.put(static_cast<char>(k % 10));
      for (int c = 0; c < 3; ++c)
        for (int p = 0; p < 1024; ++p) out.put(static_cast<char>((7 * k + c) % 256));
    }
  };
  write(dir + "/data_batch_1.bin", train);
  write(dir + "/test_batch.bin", test);
}

/// A generous upper bound for a chi-square variable with `df` degrees of freedom: mean + 5 sd.
inline double chi_square_bound(int df) { return df + 5.0 * std::sqrt(2.0 * df); }

}  // namespace htm::testing
