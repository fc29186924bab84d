// Crosses (HTM slides): pairs of segments (x1, y1, x2, y2) crossing at their common midpoint,
// the crosses' centres laid out on a balanced binary tree; tokens in a random order, with the
// true merge tree (each cross's two segments, then the crosses along the layout tree).
#include <sstream>
#include <string>

#include <torch/torch.h>

#include "../trees/layout.h"
#include "htm/dataset.h"
#include "htm/error.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"crosses", htm::PluginKind::dataset, "1.0.0", htm::kSdkAbiVersion,
          "Generated segment sets: crosses (two segments sharing their midpoint) on a balanced "
          "tree layout, true merge tree in Batch::tree; HTM slides (Crosses)",
          {{"crosses", ValueType::integer, int64_t{4}, "crosses per sample, K (2K segment tokens)"},
           {"train_size", ValueType::integer, int64_t{8192}, "training samples"},
           {"test_size", ValueType::integer, int64_t{1024}, "test samples"},
           {"seed", ValueType::integer, int64_t{0}, "generator seed; sample i depends on it alone"},
           {"shrink", ValueType::floating, 0.55,
            "distance factor per level of the tree the centres are laid out on, in (0, 1)"},
           {"angle_jitter", ValueType::floating, 15.0,
            "degrees of uniform jitter on each split direction (0 to 90)"},
           {"min_angle", ValueType::floating, 30.0,
            "smallest angle in degrees between a cross's two segments (above 0, at most 90)"}}};
}

std::string str(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

struct Part {
  torch::Tensor input;  // S×2K×4 float
  torch::Tensor tree;   // S×(2K−1)×2 int64
};

class Crosses : public htm::Dataset {
 public:
  Crosses(const htm::Params& params, const htm::BuildContext&)
      : crosses_(params.integer("crosses")) {
    const int64_t train = params.integer("train_size"), test = params.integer("test_size");
    htm::data::CrossParams cross{{params.number("shrink"), params.number("angle_jitter")},
                                 params.number("min_angle")};
    if (crosses_ < 1)
      throw htm::Error("crosses: crosses must be at least 1, got " + std::to_string(crosses_));
    if (train < 1 || test < 1)
      throw htm::Error("crosses: train_size and test_size must be at least 1, got " +
                       std::to_string(train) + " and " + std::to_string(test));
    if (!(cross.layout.shrink > 0 && cross.layout.shrink < 1))
      throw htm::Error("crosses: shrink must lie strictly between 0 and 1, got " +
                       str(cross.layout.shrink));
    if (!(cross.layout.angle_jitter >= 0 && cross.layout.angle_jitter <= 90))
      throw htm::Error("crosses: angle_jitter must lie in [0, 90] degrees, got " +
                       str(cross.layout.angle_jitter));
    if (!(cross.min_angle > 0 && cross.min_angle <= 90))
      throw htm::Error("crosses: min_angle must lie in (0, 90] degrees, got " +
                       str(cross.min_angle));
    const int64_t seed = params.integer("seed");
    train_ = generate(train, seed, 0, cross);
    test_ = generate(test, seed, 1, cross);
  }

  std::vector<int64_t> sample_shape() const override { return {2 * crosses_, 4}; }
  int64_t num_classes() const override { return 0; }
  int64_t size(htm::Split split) const override { return part(split).input.size(0); }

  htm::Batch get(htm::Split split, const at::Tensor& indices) const override {
    const Part& p = part(split);
    return {p.input.index_select(0, indices), at::Tensor(), p.tree.index_select(0, indices)};
  }

 private:
  Part generate(int64_t samples, int64_t seed, int split,
                const htm::data::CrossParams& cross) const {
    const int64_t n = 2 * crosses_;
    Part p{torch::empty({samples, n, 4}, torch::kFloat),
           torch::empty({samples, n - 1, 2}, torch::kLong)};
    auto x = p.input.accessor<float, 3>();
    auto t = p.tree.accessor<int64_t, 3>();
    for (int64_t i = 0; i < samples; ++i) {
      const auto s =
          htm::data::cross_sample(crosses_, cross, htm::data::sample_seed(seed, split, i));
      for (int64_t k = 0; k < n; ++k)
        for (int d = 0; d < 4; ++d) x[i][k][d] = static_cast<float>(s.segments[k][d]);
      for (int64_t k = 0; k + 1 < n; ++k)
        for (int c = 0; c < 2; ++c) t[i][k][c] = s.merges[k][c];
    }
    return p;
  }

  const Part& part(htm::Split split) const { return split == htm::Split::train ? train_ : test_; }
  int64_t crosses_;
  Part train_, test_;
};

}  // namespace

HTM_REGISTER_PLUGIN(Crosses, manifest)
