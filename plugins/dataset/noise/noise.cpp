// Uniform noise images of any shape: no files, so `htm bench` and smoke tests run anywhere.
#include <torch/torch.h>

#include "htm/dataset.h"
#include "htm/error.h"

namespace {

htm::Manifest manifest() {
  using T = htm::ValueType;
  return {"noise",
          htm::PluginKind::dataset,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Uniform noise images in [-1,1] of any shape, drawn from a seed (benchmarks, smoke tests)",
          {{"channels", T::integer, int64_t{3}, "image channels"},
           {"size", T::integer, int64_t{32}, "image side in pixels"},
           {"train_size", T::integer, int64_t{256}, "training samples"},
           {"test_size", T::integer, int64_t{64}, "test samples"},
           {"classes", T::integer, int64_t{0}, "random labels in 0..classes-1; 0: unlabelled"},
           {"seed", T::integer, int64_t{0}, "seed the samples are drawn from"}}};
}

class Noise : public htm::Dataset {
 public:
  Noise(const htm::Params& params, const htm::BuildContext&)
      : channels_(params.integer("channels")), side_(params.integer("size")), classes_(params.integer("classes")) {
    if (channels_ < 1 || side_ < 1) throw htm::Error("noise: channels and size must be at least 1");
    if (classes_ < 0 || classes_ == 1) throw htm::Error("noise: classes must be 0 (unlabelled) or at least 2");
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(params.integer("seed")));
    for (auto [split, key] : {std::pair{0, "train_size"}, std::pair{1, "test_size"}}) {
      const int64_t n = params.integer(key);
      if (n < 1) throw htm::Error(std::string("noise: ") + key + " must be at least 1");
      images_[split] = torch::rand({n, channels_, side_, side_}, gen) * 2 - 1;
      if (classes_ > 0) labels_[split] = torch::randint(classes_, {n}, gen);
    }
  }

  std::vector<int64_t> sample_shape() const override { return {channels_, side_, side_}; }
  int64_t num_classes() const override { return classes_; }
  int64_t size(htm::Split split) const override { return images_[index(split)].size(0); }

  htm::Batch get(htm::Split split, const at::Tensor& indices) const override {
    const int i = index(split);
    htm::Batch batch;
    batch.input = images_[i].index_select(0, indices);
    if (classes_ > 0) batch.labels = labels_[i].index_select(0, indices);
    return batch;
  }

 private:
  static int index(htm::Split split) { return split == htm::Split::train ? 0 : 1; }
  int64_t channels_, side_, classes_;
  torch::Tensor images_[2], labels_[2];
};

}  // namespace

HTM_REGISTER_PLUGIN(Noise, manifest)
