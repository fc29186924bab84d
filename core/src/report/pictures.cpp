#include "report/pictures.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <sstream>

#include <cairo.h>
#include <torch/torch.h>

#include "htm/error.h"

namespace htm {
namespace {

// Writes the picture and frees it; a failed write names the file and, where the system said
// why (a full disk), its reason.
void save(cairo_surface_t* surface, cairo_t* cr, const std::string& path) {
  cairo_destroy(cr);
  errno = 0;
  const auto status = cairo_surface_write_to_png(surface, path.c_str());
  const int why = errno;
  cairo_surface_destroy(surface);
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error("cannot write picture '" + path + "': " + cairo_status_to_string(status) +
                (why != 0 ? std::string(" (") + std::strerror(why) + ")" : ""));
}

}  // namespace

void write_image_grid(const std::string& path, const std::vector<at::Tensor>& rows, int scale) {
  if (rows.empty() || rows[0].dim() != 4) throw Error("write_image_grid: rows must be N×C×H×W");
  const int64_t n = rows[0].size(0), channels = rows[0].size(1);
  const int64_t h = rows[0].size(2), w = rows[0].size(3), gap = 2;
  const int width = static_cast<int>(n * (w * scale + gap) + gap);
  const int height = static_cast<int>(rows.size() * (h * scale + gap) + gap);
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  for (size_t r = 0; r < rows.size(); ++r) {
    auto px = ((rows[r].detach().to(torch::kCPU, torch::kFloat).clamp(-1, 1) + 1) * 0.5).contiguous();
    auto a = px.accessor<float, 4>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const double red = a[i][0][y][x];
          const double green = channels == 3 ? a[i][1][y][x] : red;
          const double blue = channels == 3 ? a[i][2][y][x] : red;
          cairo_set_source_rgb(cr, red, green, blue);
          cairo_rectangle(cr, gap + i * (w * scale + gap) + x * scale, gap + r * (h * scale + gap) + y * scale, scale,
                          scale);
          cairo_fill(cr);
        }
  }
  save(surface, cr, path);
}

namespace {

constexpr int kGap = 4, kTitleH = 26, kLegendLineH = 20, kLegendEntryW = 72;

// matplotlib's tab10 without its grey, which would read as the sample's own grey.
constexpr std::array<std::array<double, 3>, 9> kPalette{{{0.122, 0.467, 0.706},
                                                         {1.000, 0.498, 0.055},
                                                         {0.173, 0.627, 0.173},
                                                         {0.839, 0.153, 0.157},
                                                         {0.580, 0.404, 0.741},
                                                         {0.549, 0.337, 0.294},
                                                         {0.890, 0.467, 0.761},
                                                         {0.737, 0.741, 0.133},
                                                         {0.090, 0.745, 0.812}}};

std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// One cell: maps [-1, 1]² (y up) into the square inset by 6%.
struct Cell {
  double left, top, size;
  double x(double v) const { return left + size / 2 + v * 0.44 * size; }
  double y(double v) const { return top + size / 2 - v * 0.44 * size; }
};

void begin_cell(cairo_t* cr, const Cell& c) {
  cairo_set_source_rgb(cr, 0.78, 0.78, 0.78);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, c.left + 0.5, c.top + 0.5, c.size - 1, c.size - 1);
  cairo_stroke(cr);
  cairo_save(cr);
  cairo_rectangle(cr, c.left, c.top, c.size, c.size);
  cairo_clip(cr);
}

void dot(cairo_t* cr, double x, double y, double r) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, r, 0, 2 * M_PI);
  cairo_fill(cr);
}

void line(cairo_t* cr, double x1, double y1, double x2, double y2) {
  cairo_move_to(cr, x1, y1);
  cairo_line_to(cr, x2, y2);
  cairo_stroke(cr);
}

// Points (F = 2) or segments (F = 4) of one sample, a float N×F accessor.
void draw_tokens(cairo_t* cr, const Cell& c, const at::TensorAccessor<float, 2>& s, double grey) {
  const double r = std::max(2.0, c.size / 64);
  cairo_set_source_rgb(cr, grey, grey, grey);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (int64_t i = 0; i < s.size(0); ++i) {
    if (std::isnan(s[i][0])) continue;  // padding: samples of a grid may have fewer elements
    if (s.size(1) == 2) {
      dot(cr, c.x(s[i][0]), c.y(s[i][1]), r);
      continue;
    }
    cairo_set_line_width(cr, std::max(1.5, c.size / 100));
    line(cr, c.x(s[i][0]), c.y(s[i][1]), c.x(s[i][2]), c.y(s[i][3]));
    dot(cr, c.x(s[i][0]), c.y(s[i][1]), r * 0.6);
    dot(cr, c.x(s[i][2]), c.y(s[i][3]), r * 0.6);
  }
}

at::Tensor checked_samples(const at::Tensor& t, const std::string& what) {
  if (!t.defined() || t.dim() != 3 || (t.size(2) != 2 && t.size(2) != 4) || t.size(0) == 0)
    throw Error(what + " must be S×N×F with S ≥ 1 and F = 2 (points) or 4 (segments), not " +
                (t.defined() ? shape_of(t) : std::string("undefined")) + ".");
  return t.detach().to(torch::kCPU, torch::kFloat).contiguous();
}

cairo_t* white_canvas(int width, int height, cairo_surface_t** surface) {
  *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t* cr = cairo_create(*surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  return cr;
}

void check_tree(const MergeTree& t, int64_t n, size_t s, size_t c) {
  const std::string where = "policy diagram tree for sample " + std::to_string(s) + ", column " + std::to_string(c);
  if (t.leaves != n)
    throw Error(where + " has " + std::to_string(t.leaves) + " leaves; the sample has " + std::to_string(n) +
                " tokens.");
  check_merge_tree(t, where);
  for (size_t k = 0; k < t.merges.size(); ++k)
    if (t.layer[k] < 1) throw Error(where + ": merge " + std::to_string(k) + " has layer < 1.");
}

// Merge lines between cluster centroids, higher layers first so short low-layer lines stay on top.
void draw_tree(cairo_t* cr, const Cell& c, const at::TensorAccessor<float, 2>& s, const MergeTree& t) {
  const int64_t n = t.leaves;
  std::vector<std::array<double, 3>> sum(n + t.merges.size());  // x, y, count
  for (int64_t i = 0; i < n; ++i)
    sum[i] = s.size(1) == 2 ? std::array<double, 3>{s[i][0], s[i][1], 1}
                            : std::array<double, 3>{(s[i][0] + s[i][2]) / 2.0, (s[i][1] + s[i][3]) / 2.0, 1};
  for (size_t k = 0; k < t.merges.size(); ++k) {
    const auto &a = sum[t.merges[k][0]], &b = sum[t.merges[k][1]];
    sum[n + k] = {a[0] + b[0], a[1] + b[1], a[2] + b[2]};
  }
  auto pos = [&](int64_t node) {
    const auto& v = sum[node];
    return std::array<double, 2>{c.x(v[0] / v[2]), c.y(v[1] / v[2])};
  };
  std::vector<size_t> order(t.merges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return t.layer[i] > t.layer[j]; });
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  // A cross's two segments share a midpoint, so their merge line has no length: tint each merged
  // leaf segment with its merge's colour instead.
  for (size_t k = 0; k < t.merges.size() && s.size(1) == 4; ++k)
    for (int64_t i : t.merges[k])
      if (i < n) {
        const auto rgb = layer_colour(t.layer[k]);
        cairo_set_source_rgba(cr, rgb[0], rgb[1], rgb[2], 0.6);
        cairo_set_line_width(cr, std::max(1.5, c.size / 100));
        line(cr, c.x(s[i][0]), c.y(s[i][1]), c.x(s[i][2]), c.y(s[i][3]));
      }
  for (bool dots : {false, true})  // dots after all lines, so overlapping lines hide none
    for (size_t k : order) {
      const auto rgb = layer_colour(t.layer[k]);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_set_line_width(cr, std::max(1.2, c.size / 60 * std::pow(0.85, t.layer[k] - 1)));
      const auto p = pos(t.merges[k][0]), q = pos(t.merges[k][1]), m = pos(n + k);
      if (dots)
        dot(cr, m[0], m[1], std::max(2.0, c.size / 80));
      else
        line(cr, p[0], p[1], q[0], q[1]);
    }
}

}  // namespace

std::array<double, 3> layer_colour(int64_t layer) {
  return kPalette[static_cast<size_t>(std::max<int64_t>(layer, 1) - 1) % kPalette.size()];
}

void write_point_grid(const std::string& path, const std::vector<at::Tensor>& rows, int cell_px) {
  if (rows.empty()) throw Error("write_point_grid: there are no rows to draw.");
  if (cell_px < 8) throw Error("write_point_grid: cells must be at least 8 px.");
  std::vector<at::Tensor> data;
  for (size_t r = 0; r < rows.size(); ++r) {
    data.push_back(checked_samples(rows[r], "write_point_grid: row " + std::to_string(r)));
    if (data[r].size(0) != data[0].size(0))
      throw Error("write_point_grid: row " + std::to_string(r) + " has " + std::to_string(data[r].size(0)) +
                  " samples, row 0 has " + std::to_string(data[0].size(0)) + ".");
  }
  const int64_t columns = data[0].size(0);
  cairo_surface_t* surface;
  cairo_t* cr = white_canvas(static_cast<int>(columns * (cell_px + kGap) + kGap),
                             static_cast<int>(rows.size() * (cell_px + kGap) + kGap), &surface);
  for (size_t r = 0; r < data.size(); ++r) {
    const auto a = data[r].accessor<float, 3>();
    for (int64_t i = 0; i < columns; ++i) {
      const Cell c{kGap + i * (cell_px + kGap) + 0.0, kGap + r * (cell_px + kGap) + 0.0, static_cast<double>(cell_px)};
      begin_cell(cr, c);
      draw_tokens(cr, c, a[i], 0.1);
      cairo_restore(cr);
    }
  }
  save(surface, cr, path);
}

void write_policy_diagram(const std::string& path, const at::Tensor& samples,
                          const std::vector<std::vector<MergeTree>>& panels, const std::vector<std::string>& titles,
                          int cell_px) {
  const auto data = checked_samples(samples, "write_policy_diagram: samples");
  const int64_t count = data.size(0), n = data.size(1);
  const size_t columns = titles.size();
  if (columns == 0) throw Error("write_policy_diagram: there are no columns (titles).");
  if (cell_px < 8) throw Error("write_policy_diagram: cells must be at least 8 px.");
  if (static_cast<int64_t>(panels.size()) != count)
    throw Error("write_policy_diagram: " + std::to_string(panels.size()) + " panels for " + std::to_string(count) +
                " samples.");
  int64_t layers = 0;
  for (size_t s = 0; s < panels.size(); ++s) {
    if (panels[s].size() != columns)
      throw Error("write_policy_diagram: sample " + std::to_string(s) + " has " + std::to_string(panels[s].size()) +
                  " trees for " + std::to_string(columns) + " titles.");
    for (size_t c = 0; c < columns; ++c) {
      check_tree(panels[s][c], n, s, c);
      for (int64_t l : panels[s][c].layer) layers = std::max(layers, l);
    }
  }
  const int width = static_cast<int>(columns * (cell_px + kGap) + kGap);
  const int per_line = std::max(1, (width - 2 * kGap) / kLegendEntryW);
  const int legend_lines = static_cast<int>((layers + per_line - 1) / per_line);
  const int cells_bottom = static_cast<int>(kTitleH + count * (cell_px + kGap) + kGap);
  cairo_surface_t* surface;
  cairo_t* cr = white_canvas(width, cells_bottom + (legend_lines ? legend_lines * kLegendLineH + 4 : 0), &surface);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_source_rgb(cr, 0, 0, 0);
  for (size_t c = 0; c < columns; ++c) {
    cairo_text_extents_t ext;
    cairo_set_font_size(cr, 14);
    cairo_text_extents(cr, titles[c].c_str(), &ext);
    if (ext.width > cell_px - 6) {  // shrink a long title to its column
      cairo_set_font_size(cr, 14.0 * (cell_px - 6) / ext.width);
      cairo_text_extents(cr, titles[c].c_str(), &ext);
    }
    cairo_move_to(cr, kGap + c * (cell_px + kGap) + (cell_px - ext.width) / 2 - ext.x_bearing, 19);
    cairo_show_text(cr, titles[c].c_str());
  }
  const auto a = data.accessor<float, 3>();
  for (int64_t s = 0; s < count; ++s)
    for (size_t c = 0; c < columns; ++c) {
      const Cell cell{kGap + c * (cell_px + kGap) + 0.0, kTitleH + kGap + s * (cell_px + kGap) + 0.0,
                      static_cast<double>(cell_px)};
      begin_cell(cr, cell);
      if (a[s].size(1) == 4) draw_tokens(cr, cell, a[s], 0.72);
      draw_tree(cr, cell, a[s], panels[s][c]);
      // Leaf positions on top, so every line visibly ends at a token.
      cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
      for (int64_t i = 0; i < n; ++i) {
        const double x = a[s].size(1) == 2 ? a[s][i][0] : (a[s][i][0] + a[s][i][2]) / 2;
        const double y = a[s].size(1) == 2 ? a[s][i][1] : (a[s][i][1] + a[s][i][3]) / 2;
        dot(cr, cell.x(x), cell.y(y), std::max(2.0, cell_px / 64.0));
      }
      cairo_restore(cr);
    }
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 12);
  for (int64_t l = 1; l <= layers; ++l) {
    const double x = kGap + ((l - 1) % per_line) * kLegendEntryW;
    const double y = cells_bottom + ((l - 1) / per_line) * kLegendLineH + 2;
    const auto rgb = layer_colour(l);
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_rectangle(cr, x, y + 4, 12, 12);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x + 17, y + 14);
    cairo_show_text(cr, ("layer " + std::to_string(l)).c_str());
  }
  save(surface, cr, path);
}

namespace {

constexpr int kAxisW = 30, kAxisH = 30, kScaleH = 30;  // a heatmap panel's margins

void text_at(cairo_t* cr, double x, double y, const std::string& text, double align = 0, double size = 11) {
  cairo_set_font_size(cr, size);
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  cairo_move_to(cr, x - align * extents.x_advance, y);
  cairo_show_text(cr, text.c_str());
}

std::string short_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

void heat_colour(cairo_t* cr, double v) { cairo_set_source_rgb(cr, 1 - 0.92 * v, 1 - 0.75 * v, 1 - 0.45 * v); }

// One panel: the map at (left, top), its axes (row i: the token; column j: its partner), and
// under them the colour scale from the smallest off-diagonal value to the largest. A map with
// no spread (a policy that prefers no partner) says so instead of staying white.
void heatmap_panel(cairo_t* cr, const at::Tensor& map_in, const std::string& title, double left, double top,
                   int cell_px) {
  const auto map = map_in.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t T = map.size(0);
  const double peak = map.max().item<double>(), cell = static_cast<double>(cell_px) / T;
  const double floor = (map + torch::eye(T) * peak).min().item<double>(), span = peak - floor;
  const bool uniform = span <= 1e-6 * std::max(1e-12, std::abs(peak));
  auto a = map.accessor<float, 2>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      heat_colour(cr, i == j || uniform ? 0.0 : std::clamp((a[i][j] - floor) / span, 0.0, 1.0));
      cairo_rectangle(cr, left + j * cell, top + i * cell, std::ceil(cell), std::ceil(cell));
      cairo_fill(cr);
    }
  cairo_set_source_rgb(cr, 0.78, 0.78, 0.78);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, left + 0.5, top + 0.5, cell_px - 1, cell_px - 1);
  cairo_stroke(cr);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  text_at(cr, left - kAxisW + 2, top - 8, title, 0, 12);
  const std::string last = std::to_string(T - 1);
  text_at(cr, left - 3, top + 10, "0", 1);
  text_at(cr, left - 3, top + cell_px, last, 1);
  text_at(cr, left, top + cell_px + 12, "0");
  text_at(cr, left + cell_px, top + cell_px + 12, last, 1);
  text_at(cr, left + cell_px / 2.0, top + cell_px + 24, "partner j", 0.5);
  cairo_save(cr);
  cairo_move_to(cr, left - 8, top + cell_px / 2.0);
  cairo_rotate(cr, -M_PI / 2);
  cairo_rel_move_to(cr, -20, 0);
  cairo_show_text(cr, "token i");
  cairo_restore(cr);
  const double bar = top + cell_px + kAxisH;
  if (uniform) {
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    text_at(cr, left + cell_px / 2.0, top + cell_px / 2.0 - 6, "uniform: no partner preferred", 0.5);
    text_at(cr, left + cell_px / 2.0, top + cell_px / 2.0 + 10, "every value " + short_number(peak), 0.5);
    text_at(cr, left, bar + 10, "no spread to scale");
    return;
  }
  for (int x = 0; x < cell_px; ++x) {
    heat_colour(cr, static_cast<double>(x) / std::max(1, cell_px - 1));
    cairo_rectangle(cr, left + x, bar, 1, 8);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  text_at(cr, left, bar + 20, short_number(floor));
  text_at(cr, left + cell_px, bar + 20, short_number(peak), 1);
  text_at(cr, left + cell_px / 2.0, bar + 20, "p(merge i with j)", 0.5);
}

}  // namespace

void write_heatmaps(const std::string& path, const std::vector<at::Tensor>& maps,
                    const std::vector<std::string>& titles, int cell_px) {
  if (maps.empty() || maps.size() != titles.size()) throw Error("write_heatmaps: one title per map");
  for (const auto& m : maps)
    if (m.dim() != 2 || m.size(0) != m.size(1)) throw Error("write_heatmaps: maps must be T×T, got " + shape_of(m));
  const int panel = kAxisW + cell_px + kGap;
  const int width = static_cast<int>(maps.size()) * panel + kGap;
  const int height = kTitleH + kGap + cell_px + kAxisH + kScaleH;
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  for (size_t k = 0; k < maps.size(); ++k)
    heatmap_panel(cr, maps[k], titles[k], kGap + static_cast<double>(k) * panel + kAxisW, kTitleH + kGap, cell_px);
  save(surface, cr, path);
}

}  // namespace htm
