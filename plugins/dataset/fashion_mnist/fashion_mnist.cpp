// Fashion-MNIST from Debian's dataset-fashion-mnist package (IDX files, gzip-compressed), or
// from the folder the environment variable HTM_FASHION_MNIST names (a machine without the package).
#include <cstdlib>
#include <utility>

#include <torch/torch.h>

#include "htm/byte_images.h"
#include "htm/error.h"
#include "idx.h"

namespace {

const char* const kDebianRoot = "/usr/share/datasets/fashion-mnist";

// The folder read: the default (Debian's) is replaced by $HTM_FASHION_MNIST where that is set,
// at read time, so the run's settings (and its config hash) stay those of any other machine.
std::string folder(const std::string& root) {
  const char* moved = std::getenv("HTM_FASHION_MNIST");
  return root == kDebianRoot && moved != nullptr && *moved != '\0' ? moved : root;
}

htm::Manifest manifest() {
  return {"fashion_mnist",
          htm::PluginKind::dataset,
          "1.0.0",
          htm::kSdkAbiVersion,
          "Fashion-MNIST 28x28 grey images in [-1,1], 10 classes (60k train / 10k test)",
          {{"root", htm::ValueType::string, std::string(kDebianRoot),
            "folder holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the default is read from "
            "$HTM_FASHION_MNIST where that is set)"}}};
}

std::string locate(const std::string& root, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    const std::string path = root + "/" + stem + suffix;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
      return path;
    }
  }
  throw htm::Error("fashion_mnist: missing '" + root + "/" + stem +
                   ".gz' (install the dataset-fashion-mnist package, or set dataset.root or HTM_FASHION_MNIST)");
}

using Part = htm::ByteImageDataset::Part;  // N×1×28×28

Part read_part(const std::string& root, const std::string& prefix) {
  auto images = idx::read(locate(root, prefix + "-images-idx3-ubyte"));
  auto labels = idx::read(locate(root, prefix + "-labels-idx1-ubyte"));
  if (images.shape.size() != 3 || labels.shape.size() != 1 || images.shape[0] != labels.shape[0])
    throw htm::Error("fashion_mnist: '" + root + "/" + prefix + "' images and labels do not match");
  const int64_t n = images.shape[0], h = images.shape[1], w = images.shape[2];
  Part part;
  part.images = torch::from_blob(images.data.data(), {n, 1, h, w}, torch::kUInt8).clone();
  part.labels = torch::from_blob(labels.data.data(), {n}, torch::kUInt8).to(torch::kLong);
  return part;
}

class FashionMnist : public htm::ByteImageDataset {
 public:
  FashionMnist(const htm::Params& params, const htm::BuildContext&) : ByteImageDataset(10) {
    const std::string root = folder(params.text("root"));
    Part train = read_part(root, "train");  // the training files first: their errors first
    hold(std::move(train), read_part(root, "t10k"));
  }
};

}  // namespace

HTM_REGISTER_PLUGIN(FashionMnist, manifest)
