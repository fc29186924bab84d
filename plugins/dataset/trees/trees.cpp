// Trees (HTM slides): the N leaves of a balanced binary tree laid out in the plane with sibling
// distances shrinking by level, as (x, y) tokens in a random order, with the true merge tree.
#include <sstream>
#include <string>

#include <torch/torch.h>

#include "htm/dataset.h"
#include "htm/error.h"
#include "layout.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {"trees", htm::PluginKind::dataset, "1.0.0", htm::kSdkAbiVersion,
          "Generated point sets: leaves (x,y) of a balanced binary tree laid out with shrinking "
          "sibling distances, true merge tree in Batch::tree; HTM slides (Trees)",
          {{"tokens", ValueType::integer, int64_t{16}, "leaves per sample, N (at least 2)"},
           {"train_size", ValueType::integer, int64_t{8192}, "training samples"},
           {"test_size", ValueType::integer, int64_t{1024}, "test samples"},
           {"seed", ValueType::integer, int64_t{0}, "generator seed; sample i depends on it alone"},
           {"shrink", ValueType::floating, 0.55,
            "sibling distance factor per tree level, in (0, 1)"},
           {"angle_jitter", ValueType::floating, 15.0,
            "degrees of uniform jitter on each split direction (0 to 90)"}}};
}

std::string str(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

struct Part {
  torch::Tensor input;  // S×N×2 float
  torch::Tensor tree;   // S×(N−1)×2 int64
};

class Trees : public htm::Dataset {
 public:
  Trees(const htm::Params& params, const htm::BuildContext&) : tokens_(params.integer("tokens")) {
    const int64_t train = params.integer("train_size"), test = params.integer("test_size");
    htm::data::LayoutParams layout{params.number("shrink"), params.number("angle_jitter")};
    if (tokens_ < 2)
      throw htm::Error("trees: tokens must be at least 2, got " + std::to_string(tokens_));
    if (train < 1 || test < 1)
      throw htm::Error("trees: train_size and test_size must be at least 1, got " +
                       std::to_string(train) + " and " + std::to_string(test));
    if (!(layout.shrink > 0 && layout.shrink < 1))
      throw htm::Error("trees: shrink must lie strictly between 0 and 1, got " +
                       str(layout.shrink));
    if (!(layout.angle_jitter >= 0 && layout.angle_jitter <= 90))
      throw htm::Error("trees: angle_jitter must lie in [0, 90] degrees, got " +
                       str(layout.angle_jitter));
    const int64_t seed = params.integer("seed");
    train_ = generate(train, seed, 0, layout);
    test_ = generate(test, seed, 1, layout);
  }

  std::vector<int64_t> sample_shape() const override { return {tokens_, 2}; }
  int64_t num_classes() const override { return 0; }
  int64_t size(htm::Split split) const override { return part(split).input.size(0); }

  htm::Batch get(htm::Split split, const at::Tensor& indices) const override {
    const Part& p = part(split);
    return {p.input.index_select(0, indices), at::Tensor(), p.tree.index_select(0, indices)};
  }

 private:
  Part generate(int64_t samples, int64_t seed, int split,
                const htm::data::LayoutParams& layout) const {
    Part p{torch::empty({samples, tokens_, 2}, torch::kFloat),
           torch::empty({samples, tokens_ - 1, 2}, torch::kLong)};
    auto x = p.input.accessor<float, 3>();
    auto t = p.tree.accessor<int64_t, 3>();
    for (int64_t i = 0; i < samples; ++i) {
      const auto s =
          htm::data::tree_sample(tokens_, layout, htm::data::sample_seed(seed, split, i));
      for (int64_t n = 0; n < tokens_; ++n)
        for (int d = 0; d < 2; ++d) x[i][n][d] = static_cast<float>(s.leaves[n][d]);
      for (int64_t k = 0; k + 1 < tokens_; ++k)
        for (int c = 0; c < 2; ++c) t[i][k][c] = s.merges[k][c];
    }
    return p;
  }

  const Part& part(htm::Split split) const { return split == htm::Split::train ? train_ : test_; }
  int64_t tokens_;
  Part train_, test_;
};

}  // namespace

HTM_REGISTER_PLUGIN(Trees, manifest)
