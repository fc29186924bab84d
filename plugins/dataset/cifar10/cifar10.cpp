// CIFAR-10 from its binary version (data_batch_{1..5}.bin, test_batch.bin: records of one
// label byte and 3072 pixel bytes, channel-major 3×32×32), the paper's dataset (Table 3).
#include <fstream>
#include <utility>

#include <torch/torch.h>

#include "htm/byte_images.h"
#include "htm/error.h"

namespace {

htm::Manifest manifest() {
  using htm::ValueType;
  return {
      "cifar10",
      htm::PluginKind::dataset,
      "1.0.0",
      htm::kSdkAbiVersion,
      "CIFAR-10 32x32 colour images in [-1,1], 10 classes, from the binary files; paper Table 3",
      {{"root", ValueType::string, std::string(""),
        "folder with data_batch_1.bin ... data_batch_5.bin and test_batch.bin"},
       {"train_files", ValueType::string_list,
        std::vector<std::string>{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                                 "data_batch_5.bin"},
        "training files inside root"},
       {"test_files", ValueType::string_list, std::vector<std::string>{"test_batch.bin"}, "test files inside root"}}};
}

constexpr int64_t kRecord = 1 + 3 * 32 * 32;

using Part = htm::ByteImageDataset::Part;  // N×3×32×32

Part read_files(const std::string& root, const std::vector<std::string>& files) {
  std::vector<char> bytes;
  for (const auto& name : files) {
    const std::string path = root + "/" + name;
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
      throw htm::Error("cifar10: cannot open '" + path +
                       "'; set dataset.root to the folder of CIFAR-10's binary version");
    const auto size = static_cast<int64_t>(in.tellg());
    if (size == 0 || size % kRecord != 0)
      throw htm::Error("cifar10: '" + path + "' has " + std::to_string(size) +
                       " bytes, not a multiple of the 3073-byte record");
    in.seekg(0);
    const size_t old = bytes.size();
    bytes.resize(old + size);
    in.read(bytes.data() + old, size);
  }
  const int64_t n = static_cast<int64_t>(bytes.size()) / kRecord;
  auto raw = torch::from_blob(bytes.data(), {n, kRecord}, torch::kUInt8);
  Part part;
  part.labels = raw.select(1, 0).to(torch::kLong);
  part.images = raw.narrow(1, 1, kRecord - 1).reshape({n, 3, 32, 32}).clone();
  if (part.labels.max().item<int64_t>() > 9)
    throw htm::Error("cifar10: label above 9 in '" + root + "': not a CIFAR-10 binary file");
  return part;
}

class Cifar10 : public htm::ByteImageDataset {
 public:
  Cifar10(const htm::Params& params, const htm::BuildContext&) : ByteImageDataset(10) {
    const std::string root = params.text("root");
    if (root.empty()) throw htm::Error("cifar10: set dataset.root to the folder of CIFAR-10's binary version");
    Part train = read_files(root, params.texts("train_files"));  // the training files first: their errors first
    hold(std::move(train), read_files(root, params.texts("test_files")));
  }
};

}  // namespace

HTM_REGISTER_PLUGIN(Cifar10, manifest)
