// What the `trees` and `crosses` dataset plugins share: every sample generated on construction
// from layout.h, stored with its true tree, served by index; and the checks of their common
// parameters. Header-only: each plugin compiles its own copy.
#pragma once

#include <sstream>
#include <string>

#include <torch/torch.h>

#include "htm/dataset.h"
#include "htm/error.h"
#include "layout.h"

namespace htm::data {

/// The parameters trees, crosses and mirrored declare (besides their own size parameter).
inline std::vector<ParamSpec> shared_params(const std::string& shrink_meaning) {
  return {{"train_size", ValueType::integer, int64_t{8192}, "training samples"},
          {"test_size", ValueType::integer, int64_t{1024}, "test samples"},
          {"seed", ValueType::integer, int64_t{0},
           "generator seed; sample i depends on it alone (and the run's seed with per_run)"},
          {kPerRunParam, ValueType::boolean, false,
           "draw the data from the run's seed too, mixed with seed: every run seed a fresh sample of the data "
           "(what a confirmation on fresh data needs); false: every run seed the same data"},
          {kRunSeedParam, ValueType::integer, int64_t{0},
           "the run's seed, set by the host (htm run); read only with per_run; an experiment file cannot set it"},
          {"shrink", ValueType::floating, 0.55, shrink_meaning + ", in (0, 1)"},
          {"angle_jitter", ValueType::floating, 15.0, "degrees of uniform jitter on each split direction (0 to 90)"}};
}

inline std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

/// A dataset of `samples` generated sets per split: sample_fn(seed) gives one sample's N×F
/// coordinates (a vector of F-arrays) and its merges in Batch::tree's convention.
class GeneratedSets : public Dataset {
 public:
  int64_t num_classes() const override { return 0; }
  int64_t size(Split split) const override { return part(split).input.size(0); }
  Batch get(Split split, const at::Tensor& indices) const override {
    const Part& p = part(split);
    return {p.input.index_select(0, indices), at::Tensor(), p.tree.index_select(0, indices)};
  }

 protected:
  /// Checks train_size and test_size, naming `plugin` in the message.
  static void check_sizes(const std::string& plugin, const Params& params) {
    const int64_t train = params.integer("train_size"), test = params.integer("test_size");
    if (train < 1 || test < 1)
      throw Error(plugin + ": train_size and test_size must be at least 1, got " + std::to_string(train) + " and " +
                  std::to_string(test));
  }

  /// Checks the shared parameters, naming `plugin` in the message; returns the layout's.
  static LayoutParams checked_layout(const std::string& plugin, const Params& params) {
    check_sizes(plugin, params);
    LayoutParams layout{params.number("shrink"), params.number("angle_jitter")};
    if (!(layout.shrink > 0 && layout.shrink < 1))
      throw Error(plugin + ": shrink must lie strictly between 0 and 1, got " + number_text(layout.shrink));
    if (!(layout.angle_jitter >= 0 && layout.angle_jitter <= 90))
      throw Error(plugin + ": angle_jitter must lie in [0, 90] degrees, got " + number_text(layout.angle_jitter));
    return layout;
  }

  /// Fills both splits with samples of `tokens` elements of `features` coordinates each, drawn
  /// from `seed`, mixed with the run's seed where the data follow it (data_follow_run_seed:
  /// pairs always, trees, crosses and mirrored with `per_run`).
  template <class SampleFn>
  void generate(const Params& params, int64_t tokens, int64_t features, SampleFn sample_fn) {
    const int64_t seed =
        data_follow_run_seed(params)
            ? static_cast<int64_t>(sample_seed(params.integer("seed"), 2, params.integer(kRunSeedParam)))
            : params.integer("seed");
    train_ = make_part(params.integer("train_size"), tokens, features, seed, 0, sample_fn);
    test_ = make_part(params.integer("test_size"), tokens, features, seed, 1, sample_fn);
  }

 private:
  struct Part {
    torch::Tensor input;  // S×N×F float
    torch::Tensor tree;   // S×(N−1)×2 int64
  };

  template <class SampleFn>
  static Part make_part(int64_t samples, int64_t tokens, int64_t features, int64_t seed, int split,
                        SampleFn sample_fn) {
    Part p{torch::empty({samples, tokens, features}, torch::kFloat),
           torch::empty({samples, tokens - 1, 2}, torch::kLong)};
    auto x = p.input.accessor<float, 3>();
    auto t = p.tree.accessor<int64_t, 3>();
    for (int64_t i = 0; i < samples; ++i) {
      const auto [elements, merges] = sample_fn(sample_seed(seed, split, i));
      for (int64_t n = 0; n < tokens; ++n)
        for (int64_t d = 0; d < features; ++d) x[i][n][d] = static_cast<float>(elements[n][d]);
      for (int64_t k = 0; k + 1 < tokens; ++k)
        for (int c = 0; c < 2; ++c) t[i][k][c] = merges[k][c];
    }
    return p;
  }

  const Part& part(Split split) const { return split == Split::train ? train_ : test_; }
  Part train_, test_;
};

}  // namespace htm::data
