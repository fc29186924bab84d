// Mirrored trees: the Trees point sets with one leaf of every pair of sibling leaves reflected
// through the origin and flagged, so true siblings are correlated but far apart: a benchmark on
// which similarity (the `nearest` policy, agglomerative clustering) is not the truth.
#include "generated.h"  // plugins/dataset/trees

namespace {

htm::Manifest manifest() {
  std::vector<htm::ParamSpec> params = {
      {"tokens", htm::ValueType::integer, int64_t{16}, "leaves per sample, N (at least 2)"}};
  for (auto& p : htm::data::shared_params("sibling distance factor per tree level")) params.push_back(p);
  params.push_back({"exact", htm::ValueType::boolean, false,
                    "the reflected leaf is its sibling's exact mirror image (a pair of sibling leaves then holds "
                    "one point's information); false: its own position, reflected"});
  return {"mirrored",
          htm::PluginKind::dataset,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Generated point sets: the trees leaves with one of each pair of sibling leaves reflected "
          "through the origin, tokens (x, y, s) with s = -1 on the reflected; true merge tree in Batch::tree",
          params};
}

class Mirrored : public htm::data::GeneratedSets {
 public:
  Mirrored(const htm::Params& params, const htm::BuildContext&)
      : tokens_(params.integer("tokens")), exact_(params.flag("exact")) {
    if (tokens_ < 2) throw htm::Error("mirrored: tokens must be at least 2, got " + std::to_string(tokens_));
    const htm::data::LayoutParams layout = checked_layout("mirrored", params);
    generate(params, tokens_, 3, [&](uint64_t seed) {
      auto s = htm::data::mirrored_sample(tokens_, layout, seed, exact_);
      return std::make_pair(std::move(s.tokens), std::move(s.merges));
    });
  }

  std::vector<int64_t> sample_shape() const override { return {tokens_, 3}; }

 private:
  int64_t tokens_;
  bool exact_;
};

}  // namespace

HTM_REGISTER_PLUGIN(Mirrored, manifest)
