#include "idx.h"

#include <zlib.h>

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
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    if (gzread(f, b, 4) != 4) throw fail("truncated header");
    a.shape.push_back((int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
    total *= a.shape.back();
  }
  a.data.resize(total);
  int64_t done = 0;
  while (done < total) {
    const int n = gzread(f, a.data.data() + done, static_cast<unsigned>(std::min<int64_t>(total - done, 1 << 30)));
    if (n <= 0) throw fail("truncated data (" + std::to_string(done) + " of " + std::to_string(total) + " bytes)");
    done += n;
  }
  gzclose(f);
  return a;
}

}  // namespace idx
