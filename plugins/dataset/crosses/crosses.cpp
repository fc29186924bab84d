// Crosses (HTM slides): pairs of segments (x1, y1, x2, y2) crossing at their common midpoint,
// the crosses' centres laid out on a balanced binary tree; tokens in a random order, with the
// true merge tree (each cross's two segments, then the crosses along the layout tree).
#include "generated.h"  // plugins/dataset/trees

namespace {

htm::Manifest manifest() {
  std::vector<htm::ParamSpec> params = {
      {"crosses", htm::ValueType::integer, int64_t{4}, "crosses per sample, K (2K segment tokens)"}};
  for (auto& p : htm::data::shared_params("distance factor per level of the tree the centres are laid out on"))
    params.push_back(p);
  params.push_back({"min_angle", htm::ValueType::floating, 30.0,
                    "smallest angle in degrees between a cross's two segments (above 0, at most 90)"});
  return {"crosses",
          htm::PluginKind::dataset,
          "1.1.0",
          htm::kSdkAbiVersion,
          "Generated segment sets: crosses (two segments sharing their midpoint) on a balanced "
          "tree layout, true merge tree in Batch::tree; HTM slides (Crosses)",
          params};
}

class Crosses : public htm::data::GeneratedSets {
 public:
  Crosses(const htm::Params& params, const htm::BuildContext&) : crosses_(params.integer("crosses")) {
    if (crosses_ < 1) throw htm::Error("crosses: crosses must be at least 1, got " + std::to_string(crosses_));
    const htm::data::CrossParams cross{checked_layout("crosses", params), params.number("min_angle")};
    if (!(cross.min_angle > 0 && cross.min_angle <= 90))
      throw htm::Error("crosses: min_angle must lie in (0, 90] degrees, got " +
                       htm::data::number_text(cross.min_angle));
    generate(params, 2 * crosses_, 4, [&](uint64_t seed) {
      auto s = htm::data::cross_sample(crosses_, cross, seed);
      return std::make_pair(std::move(s.segments), std::move(s.merges));
    });
  }

  std::vector<int64_t> sample_shape() const override { return {2 * crosses_, 4}; }

 private:
  int64_t crosses_;
};

}  // namespace

HTM_REGISTER_PLUGIN(Crosses, manifest)
