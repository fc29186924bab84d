// Reader for the IDX format of (Fashion-)MNIST, gzip-compressed or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace idx {

struct Array {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Reads an unsigned-byte IDX file (magic 0x0000080N). Throws htm::Error naming the file.
Array read(const std::string& path);

}  // namespace idx
