#include "report/pictures.h"

#include <cairo.h>
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <memory>

#include "hierarchy/merge_tree.h"
#include "htm/error.h"
#include "test_util.h"

namespace htm {
namespace {

struct Png {
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface{nullptr, &cairo_surface_destroy};
  int width() const { return cairo_image_surface_get_width(surface.get()); }
  int height() const { return cairo_image_surface_get_height(surface.get()); }
  // {r, g, b} in 0..255 of pixel (x, y); both formats read from an opaque PNG keep 0x??RRGGBB.
  std::array<int, 3> at(int x, int y) const {
    const auto* row = cairo_image_surface_get_data(surface.get()) + y * cairo_image_surface_get_stride(surface.get());
    const uint32_t v = reinterpret_cast<const uint32_t*>(row)[x];
    return {static_cast<int>((v >> 16) & 255), static_cast<int>((v >> 8) & 255), static_cast<int>(v & 255)};
  }
};

Png read_png(const std::string& path) {
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
  Png png;
  png.surface.reset(cairo_image_surface_create_from_png(path.c_str()));
  EXPECT_EQ(cairo_surface_status(png.surface.get()), CAIRO_STATUS_SUCCESS) << path;
  cairo_surface_flush(png.surface.get());
  return png;
}

bool is_white(const std::array<int, 3>& p) { return p[0] == 255 && p[1] == 255 && p[2] == 255; }
bool is_dark(const std::array<int, 3>& p) { return p[0] < 100 && p[1] < 100 && p[2] < 100; }

void expect_layer_colour(const std::array<int, 3>& p, int64_t layer) {
  const auto rgb = layer_colour(layer);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], rgb[i] * 255, 3) << "channel " << i;
}

TEST(PointGrid, CellsFollowTheDocumentedLayout) {
  const auto dir = testing::fresh_dir("grid");
  // Row 0: three one-point samples, only the middle one at the centre (the others in a corner).
  auto points = torch::full({3, 1, 2}, 0.9);
  points[1].zero_();
  // Row 1: three one-segment samples, the last a horizontal segment through the centre.
  auto segments = torch::full({3, 1, 4}, -0.9);
  segments[2] = torch::tensor({{-0.5, 0.0, 0.5, 0.0}});
  write_point_grid(dir + "/grid.png", {points, segments}, 160);
  const auto png = read_png(dir + "/grid.png");
  EXPECT_EQ(png.width(), 3 * (160 + 4) + 4);
  EXPECT_EQ(png.height(), 2 * (160 + 4) + 4);
  EXPECT_TRUE(is_dark(png.at(4 + 164 + 80, 4 + 80)));                 // row 0, cell 1: the point
  EXPECT_TRUE(is_white(png.at(4 + 80, 4 + 80)));                      // row 0, cell 0: empty centre
  EXPECT_TRUE(is_dark(png.at(4 + 2 * 164 + 80 + 20, 4 + 164 + 80)));  // row 1, cell 2: segment
  EXPECT_TRUE(is_white(png.at(4 + 164 + 80, 4 + 164 + 80)));          // row 1, cell 1: empty
}

TEST(PointGrid, BadShapesAndPathsThrow) {
  const auto dir = testing::fresh_dir("bad");
  const auto ok = torch::zeros({2, 3, 2});
  EXPECT_THROW(write_point_grid(dir + "/a.png", {}), Error);
  EXPECT_THROW(write_point_grid(dir + "/a.png", {torch::zeros({2, 3, 3})}), Error);
  EXPECT_THROW(write_point_grid(dir + "/a.png", {torch::zeros({3, 2})}), Error);
  EXPECT_THROW(write_point_grid(dir + "/a.png", {torch::zeros({0, 3, 2})}), Error);
  EXPECT_THROW(write_point_grid(dir + "/a.png", {ok, torch::zeros({3, 3, 2})}), Error);
  EXPECT_THROW(write_point_grid(dir + "/missing/a.png", {ok}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.png"));
}

TEST(PolicyDiagram, MergeLineHasItsLayerColour) {
  const auto dir = testing::fresh_dir("policy");
  const auto samples = torch::tensor({{{-0.5, 0.0}, {0.5, 0.0}}});
  const MergeTree merged{2, {{0, 1}}, {1}}, unmerged{2, {}, {}};
  write_policy_diagram(dir + "/policy.png", samples, {{merged, unmerged}}, {"learned", "true"}, 220);
  const auto png = read_png(dir + "/policy.png");
  const int cells_bottom = 26 + 1 * (220 + 4) + 4;
  EXPECT_EQ(png.width(), 2 * (220 + 4) + 4);
  EXPECT_EQ(png.height(), cells_bottom + 20 + 4);  // one legend line
  // (0.25, 0) lies on the merge line: x = 4 + 110 + 0.25·0.44·220, y = 26 + 4 + 110.
  const int x = 4 + 110 + 24, y = 26 + 4 + 110;
  expect_layer_colour(png.at(x, y), 1);
  expect_layer_colour(png.at(x, y - 1), 1);
  EXPECT_TRUE(is_white(png.at(x + 224, y)));                        // same spot, unmerged tree
  EXPECT_TRUE(is_dark(png.at(4 + 110 - 48, y)));                    // leaf 0 at (-0.5, 0)
  expect_layer_colour(png.at(4 + 6, cells_bottom + 2 + 4 + 6), 1);  // legend swatch
  bool title_drawn = false;
  for (int ty = 0; ty < 26; ++ty)
    for (int tx = 0; tx < 4 + 220; ++tx) title_drawn = title_drawn || is_dark(png.at(tx, ty));
  EXPECT_TRUE(title_drawn);
}

TEST(PolicyDiagram, SegmentsAndTreesWithoutMergesHaveNoLegend) {
  const auto dir = testing::fresh_dir("segments");
  const auto samples = torch::tensor({{{-0.8, 0.4, -0.2, 0.4}, {-0.5, 0.1, -0.5, 0.7}, {0.2, -0.3, 0.8, -0.5}}});
  write_policy_diagram(dir + "/none.png", samples, {{MergeTree{3, {}, {}}}}, {"true"}, 100);
  auto png = read_png(dir + "/none.png");
  EXPECT_EQ(png.width(), 100 + 8);
  EXPECT_EQ(png.height(), 26 + 104 + 4);
  const MergeTree tree{3, {{1, 0}, {3, 2}}, {1, 2}};
  write_policy_diagram(dir + "/tree.png", samples, {{tree}}, {"true"}, 100);
  png = read_png(dir + "/tree.png");
  // (108 − 8) / 72 = 1 legend entry per line: layers 1 and 2 on two lines.
  EXPECT_EQ(png.height(), 26 + 104 + 4 + 2 * 20 + 4);
}

TEST(PolicyDiagram, BadInputThrows) {
  const auto dir = testing::fresh_dir("bad");
  const auto path = dir + "/p.png";
  const auto samples = torch::zeros({1, 3, 2});
  const MergeTree good{3, {{0, 1}, {3, 2}}, {1, 2}};
  auto check = [&](const MergeTree& tree) {
    EXPECT_THROW(write_policy_diagram(path, samples, {{good, tree}}, {"a", "b"}), Error);
  };
  check(MergeTree{4, {}, {}});                    // leaves != N
  check(MergeTree{3, {{0, 3}}, {1}});             // node 3 is not made yet
  check(MergeTree{3, {{0, -1}}, {1}});            // no such node
  check(MergeTree{3, {{0, 1}, {1, 2}}, {1, 1}});  // leaf 1 merged twice
  check(MergeTree{3, {{0, 1}}, {}});              // a layer per merge
  check(MergeTree{3, {{0, 1}}, {0}});             // layers are 1-based
  EXPECT_THROW(write_policy_diagram(path, samples, {{good}}, {"a", "b"}), Error);
  EXPECT_THROW(write_policy_diagram(path, samples, {{good}, {good}}, {"a"}), Error);
  EXPECT_THROW(write_policy_diagram(path, samples, {{good}}, {}), Error);
  EXPECT_THROW(write_policy_diagram(path, torch::zeros({1, 3, 3}), {{good}}, {"a"}), Error);
  EXPECT_THROW(write_policy_diagram(dir + "/missing/p.png", samples, {{good}}, {"a"}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  write_policy_diagram(path, samples, {{good, good}}, {"a", "b"});
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(Pictures, HeatmapsArePanelsOfTheirSizeAndRefuseNonSquareMaps) {
  const std::string dir = htm::testing::fresh_dir("heat");
  const std::string path = dir + "/heat.png";
  auto p = torch::softmax(torch::randn({6, 6}), -1);
  write_heatmaps(path, {p, p.t()}, {"mean", "one"}, 120);
  cairo_surface_t* png = cairo_image_surface_create_from_png(path.c_str());
  ASSERT_EQ(cairo_surface_status(png), CAIRO_STATUS_SUCCESS);
  EXPECT_EQ(cairo_image_surface_get_width(png), 2 * (30 + 120 + 4) + 4);
  EXPECT_EQ(cairo_image_surface_get_height(png), 26 + 4 + 120 + 60);
  cairo_surface_destroy(png);
  // A map without spread (the random policy's) is not left white: its square says so.
  auto dark_in_square = [&](const at::Tensor& map) {
    write_heatmaps(path, {map}, {"flat"}, 120);
    cairo_surface_t* image = cairo_image_surface_create_from_png(path.c_str());
    const int stride = cairo_image_surface_get_stride(image);
    const unsigned char* data = cairo_image_surface_get_data(image);
    int dark = 0;
    for (int y = 30 + 40; y < 30 + 80; ++y)  // the middle third of the square, off the diagonal's cells
      for (int x = 4 + 30 + 2; x < 4 + 30 + 118; ++x) dark += data[y * stride + 4 * x] < 100;
    cairo_surface_destroy(image);
    return dark;
  };
  EXPECT_GT(dark_in_square(torch::full({6, 6}, 0.2)), 20) << "a flat map says it is flat";
  auto spread = torch::zeros({6, 6});
  spread[0][5] = 1;  // one dark cell in a corner, none in the middle rows' text band
  EXPECT_EQ(dark_in_square(spread), 0) << "no note on a map with spread";
  EXPECT_THROW(write_heatmaps(path, {torch::zeros({3, 4})}, {"x"}), Error);
  EXPECT_THROW(write_heatmaps(path, {p}, {}), Error);
}

}  // namespace
}  // namespace htm
