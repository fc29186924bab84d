// PNG pictures through cairo.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace htm {

/// Writes rows of images side by side: each row is N×C×H×W in [-1, 1] (C = 1 or 3), all rows
/// the same shape, each pixel drawn as a `scale`×`scale` block. Throws htm::Error on failure.
void write_image_grid(const std::string& path, const std::vector<at::Tensor>& rows, int scale = 3);

}  // namespace htm
