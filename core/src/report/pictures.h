// PNG pictures through cairo.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hierarchy/merge_tree.h"

namespace htm {

/// Writes rows of images side by side: each row is N×C×H×W in [-1, 1] (C = 1 or 3), all rows
/// the same shape, each pixel drawn as a `scale`×`scale` block. Throws htm::Error on failure.
void write_image_grid(const std::string& path, const std::vector<at::Tensor>& rows, int scale = 3);

/// Layout shared by the point-set pictures, in pixels (white background):
/// - cells are `cell_px` squares with a 4 px gap between them and around the grid; cell (r, c)
///   has its top-left corner at (4 + c·(cell_px + 4), top + 4 + r·(cell_px + 4));
/// - in a cell, [-1, 1]² maps to the square inset by 6% of cell_px, y up: (x, y) lands at
///   (left + cell_px/2 + x·s, top + cell_px/2 − y·s) with s = 0.44·cell_px, so (0, 0) is the
///   cell's centre. Drawing is clipped to the cell, which has a thin grey frame.

/// Point-set samples in a grid: one row of cells per tensor, each S×N×F (F = 2: points (x, y)
/// drawn as dark filled dots; F = 4: segments (x1, y1, x2, y2) drawn as dark lines with small
/// end dots), all with the same S, one cell per sample. Elements whose first coordinate is NaN
/// are not drawn: samples with fewer elements are padded with them. The picture is S·(cell_px + 4) + 4 wide
/// and rows·(cell_px + 4) + 4 high (top = 0). Throws htm::Error on bad shapes or when the file
/// cannot be written.
void write_point_grid(const std::string& path, const std::vector<at::Tensor>& rows, int cell_px = 160);

/// The policy diagram: the merges made at each layer, trees side by side. `samples` is S×N×F
/// (F = 2 or 4 as above); panels[s][c] is the tree drawn over sample s in column c, titled
/// titles[c] once in a 26 px band at the top (top = 26; a long title shrinks to its column).
/// Each cell shows the sample (points dark grey; segments light grey with a dark dot at the
/// midpoint) and, for every merge, a line between the centroids of the two merged clusters (a
/// centroid is the mean of the leaves' positions: a point itself, a segment's midpoint) in its
/// layer's colour, with a dot at the new cluster's centroid. A merged leaf segment is also tinted
/// with its merge's colour, since a cross's two segments share a midpoint and their merge line
/// has no length. Width is C·(cell_px + 4) + 4 for C = titles.size(); height is
/// bottom + legend, bottom = 26 + S·(cell_px + 4) + 4. The legend names layers 1..L (L the
/// highest layer drawn; no legend when there are no merges), per_line = max(1, (width − 8) / 72)
/// entries a line, in ⌈L / per_line⌉ lines of 20 px plus 4 px; entry j of line i is a 12 px
/// swatch at (4 + 72·j, bottom + 6 + 20·i) and the text "layer l". Throws htm::Error on bad
/// shapes, on trees whose leaves are not N, whose merges refer to nodes not yet made or merged
/// already, or whose layers are missing or below 1, and when the file cannot be written.
void write_policy_diagram(const std::string& path, const at::Tensor& samples,
                          const std::vector<std::vector<MergeTree>>& panels, const std::vector<std::string>& titles,
                          int cell_px = 220);

/// Heatmaps side by side (paper Figure 4): maps[k] is T×T (row i: a token, column j: its
/// partner), each drawn in a `cell_px` square under titles[k] (a 26 px band), white at the map's
/// smallest off-diagonal value (and on the diagonal) to dark blue at its largest, with its axes
/// (0 and T−1 on each; 30 px left, 30 px below) and under them that colour scale with the two
/// values (30 px). A map without spread (every off-diagonal value equal) says so in its square.
/// Width is C·(30 + cell_px + 4) + 4 for C maps; height 26 + 4 + cell_px + 60. Throws
/// htm::Error on bad shapes or when the file cannot be written.
void write_heatmaps(const std::string& path, const std::vector<at::Tensor>& maps,
                    const std::vector<std::string>& titles, int cell_px = 260);

/// The colour (r, g, b in [0, 1]) of merge layer `layer` (1-based) in the policy diagram:
/// matplotlib's tab10 without its grey (blue, orange, green, red, purple, brown, pink, olive,
/// cyan), repeating from layer 10.
std::array<double, 3> layer_colour(int64_t layer);

}  // namespace htm
