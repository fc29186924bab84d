// Trees (HTM slides): the N leaves of a balanced binary tree laid out in the plane with sibling
// distances shrinking by level, as (x, y) tokens in a random order, with the true merge tree.
#include "generated.h"

namespace {

htm::Manifest manifest() {
  std::vector<htm::ParamSpec> params = {
      {"tokens", htm::ValueType::integer, int64_t{16}, "leaves per sample, N (at least 2)"}};
  for (auto& p : htm::data::shared_params("sibling distance factor per tree level")) params.push_back(p);
  return {"trees",
          htm::PluginKind::dataset,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Generated point sets: leaves (x,y) of a balanced binary tree laid out with shrinking "
          "sibling distances, true merge tree in Batch::tree; HTM slides (Trees)",
          params};
}

class Trees : public htm::data::GeneratedSets {
 public:
  Trees(const htm::Params& params, const htm::BuildContext&) : tokens_(params.integer("tokens")) {
    if (tokens_ < 2) throw htm::Error("trees: tokens must be at least 2, got " + std::to_string(tokens_));
    const htm::data::LayoutParams layout = checked_layout("trees", params);
    generate(params, tokens_, 2, [&](uint64_t seed) {
      auto s = htm::data::tree_sample(tokens_, layout, seed);
      return std::make_pair(std::move(s.leaves), std::move(s.merges));
    });
  }

  std::vector<int64_t> sample_shape() const override { return {tokens_, 2}; }

 private:
  int64_t tokens_;
};

}  // namespace

HTM_REGISTER_PLUGIN(Trees, manifest)
