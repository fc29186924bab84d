#include "idx.h"

#include <zlib.h>

#include <algorithm>
#include <vector>

#include "htm/error.h"

namespace idx {

Array read(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // also reads uncompressed files
  if (f == nullptr) throw htm::Error("cannot open '" + path + "'");
  auto fail = [&](const std::string& why) {
    gzclose(f);
    return htm::Error("'" + path + "' is not a valid IDX file: " + why);
  };
  unsigned char magic[4];
  if (gzread(f, magic, 4) != 4) throw fail("too short");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4)
    throw fail("bad magic number (expected unsigned bytes, 1-4 dimensions)");
  Array a;
  int64_t total = 1;
  constexpr int64_t kMost = int64_t{1} << 34;  // 16 GiB: no header of a real dataset declares more
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    if (gzread(f, b, 4) != 4) throw fail("truncated header");
    a.shape.push_back((int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
    if (a.shape.back() == 0) throw fail("dimension " + std::to_string(d) + " is 0: it holds no data");
    if (a.shape.back() > kMost / total) throw fail("its header declares more than 16 GiB of data");
    total *= a.shape.back();
  }
  // Read in chunks, growing as data arrives: a header that lies about the size fails as
  // truncated instead of allocating what it claims.
  a.data.reserve(static_cast<size_t>(std::min<int64_t>(total, 1 << 26)));
  std::vector<unsigned char> chunk(1 << 20);
  int64_t done = 0;
  while (done < total) {
    const int n = gzread(f, chunk.data(), static_cast<unsigned>(std::min<int64_t>(total - done, chunk.size())));
    if (n <= 0)
      throw fail("truncated data (" + std::to_string(done) + " of the " + std::to_string(total) +
                 " bytes its header declares)");
    a.data.insert(a.data.end(), chunk.begin(), chunk.begin() + n);
    done += n;
  }
  gzclose(f);
  return a;
}

}  // namespace idx
