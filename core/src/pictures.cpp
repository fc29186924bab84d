#include "pictures.h"

#include <cairo.h>
#include <torch/torch.h>

#include "htm/error.h"

namespace htm {

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
    auto px = ((rows[r].detach().to(torch::kFloat).clamp(-1, 1) + 1) * 0.5).contiguous();
    auto a = px.accessor<float, 4>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const double red = a[i][0][y][x];
          const double green = channels == 3 ? a[i][1][y][x] : red;
          const double blue = channels == 3 ? a[i][2][y][x] : red;
          cairo_set_source_rgb(cr, red, green, blue);
          cairo_rectangle(cr, gap + i * (w * scale + gap) + x * scale,
                          gap + r * (h * scale + gap) + y * scale, scale, scale);
          cairo_fill(cr);
        }
  }
  cairo_destroy(cr);
  const auto status = cairo_surface_write_to_png(surface, path.c_str());
  cairo_surface_destroy(surface);
  if (status != CAIRO_STATUS_SUCCESS)
    throw Error("cannot write picture '" + path + "': " + cairo_status_to_string(status));
}

}  // namespace htm
