// The model's behaviour pinned bit for bit, before anything moves it (issue 40): every valid
// combination of the architecture options on a tiny config, a fixed seed, one thread, the native
// and the portable kernels, three training steps with replay and the anytime loss on. Each case
// hashes, in order: every step's loss and logged terms (their bits), then one more pass's
// output, each of its draws (src, dst or index, log-probability), the names of
// named_parameters() in order with each parameter's bytes, and the run generator's state. The
// digests are committed in tests/data/golden_model.txt; a case that is invalid is pinned by its
// error message instead. Bits depend on the CPU (oneDNN and OpenBLAS pick their kernels by
// instruction set), so digests are kept per CPU (its model name and vector extensions) and
// build (with or without the native kernels); where none are pinned the test skips and says how
// to pin them. The gpu kernels are pinned
// too, as they run on the CPU.
//
// A change that should not change the numbers (moving code, assembling the model once) must
// leave every digest as it is. A change that should, rewrites the file on purpose and says why:
//   HTM_GOLDEN_WRITE=1 build/tests/htm_tests --gtest_filter='GoldenModel.*'
// scripts/golden.sh checks (or with --write rewrites) this CPU's and, on an AVX-512 CPU, an AVX2
// one's too: under ATEN_CPU_CAPABILITY=avx2 the test names the CPU by its AVX2 extensions alone.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "config/experiment_config.h"
#include "htm/error.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "plugins_util.h"
#include "registry.h"
#include "test_util.h"
#include "train/experiment.h"
#include "train/step.h"

namespace htm {
namespace {

// FNV-1a, 64 bits, over everything fed to it.
class Digest {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ULL;
  }
  void text(const std::string& s) { bytes(s.data(), s.size() + 1); }
  void number(double v) { bytes(&v, sizeof v); }
  void tensor(const torch::Tensor& t) {
    if (!t.defined()) return text("undefined");
    auto c = t.detach().to(torch::kCPU).contiguous();
    text(std::string(c10::toString(c.scalar_type())) + c10::str(c.sizes()));
    bytes(c.data_ptr(), c.numel() * c.element_size());
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h_));
    return out;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

// The tiny configs: Trees (reconstruction, with a true tree for the leaf classifier) and noise
// images with labels (classification).
std::string config_file(const std::string& dir, bool classify) {
  const std::string path = dir + (classify ? "/classify.toml" : "/reconstruct.toml");
  std::ofstream out(path);
  out << "[experiment]\nname = \"golden\"\nseeds = [0]\n";
  if (classify)
    out << "[dataset]\nplugin = \"noise\"\nchannels = 1\nsize = 8\ntrain_size = 64\ntest_size = 16\nclasses = 3\n"
        << "[adapter]\nplugin = \"image\"\npatch = 2\nfourier_bands = 2\n"
        << "[loss.cross_entropy]\n"
        << "[model]\ntask = \"classify\"\n";
  else
    out << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 64\ntest_size = 16\n"
        << "[adapter]\nplugin = \"points\"\n"
        << "[loss.point_set]\n"
        << "[model]\n";
  out << "dim = 16\nheads = 2\nlayers = 3\nmlp_ratio = 2\ndropout = 0.1\n"
      << "[train]\nbatch_size = 8\nlr = 0.001\nrho0 = 1.0\nimages = 0\ncheckpoint = false\n"
      << (classify ? "" : "anytime = 0.5\n") << "[estimator]\nreplay = 4\n"
      << "[runtime]\nthreads = 1\n";
  return path;
}

// One case: the overrides of an option combination, under one kernel set.
std::string digest_of(const std::string& file, const std::vector<std::string>& overrides, Kernels kernels) {
  KernelsScope scope(kernels);
  PrecisionScope fp32(Precision::fp32);  // a run earlier in this process may have left bf16 in force
  set_threads(1);
  try {
    ExperimentFile experiment = ExperimentFile::load(file, overrides);
    const ResolvedConfig config = experiment.resolve(experiment.variants()[0], htm::testing::plugins());
    torch::manual_seed(0);
    Experiment ex = assemble(config, htm::testing::plugins(), 0);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
    TrainStep step(ex, generator);
    ex.model->train();
    Digest d;
    const int64_t B = config.settings.train.batch_size;
    for (int64_t k = 0; k < 3; ++k) {
      StepRequest request;
      request.batch = ex.dataset->get(Split::train, torch::arange(k * B, (k + 1) * B));
      request.batch_rows = B;
      request.schedule = ex.schedule;
      request.step = k;
      request.log = true;
      const StepReport report = step(request);
      d.number(report.loss);
      for (const auto& term : report.terms) {
        d.text(term.name);
        d.number(term.value);
      }
    }
    torch::NoGradGuard no_grad;
    auto batch = ex.dataset->get(Split::train, torch::arange(0, B));
    ForwardResult out = ex.model->forward(batch.input, ex.schedule, generator);
    d.tensor(out.output);
    for (const auto& draw : out.draws) {
      d.text(draw.kind == Draw::Kind::merge ? "merge" : "unmerge");
      d.tensor(draw.src);
      d.tensor(draw.dst);
      d.tensor(draw.index);
      d.tensor(draw.log_prob);
    }
    for (const auto& p : ex.model->named_parameters()) {
      d.text(p.key());
      d.tensor(p.value());
    }
    d.tensor(generator.get_state());
    return d.hex();
  } catch (const Error& e) {  // the message without the machine's temporary folder
    std::string message = e.what();
    const std::string folder = file.substr(0, file.rfind('/') + 1);
    for (size_t at; (at = message.find(folder)) != std::string::npos;) message.replace(at, folder.size(), "");
    return "invalid: " + message;
  }
}

// Every combination: mixing (model.transformer), refinement (model.cross_attention), merged
// scale (estimator.method = "prob_scale"), the unmerge choice (policy, mirror) and the leaf
// classifier, for reconstruction; the first three for classification (no decoder).
std::map<std::string, std::pair<std::string, std::vector<std::string>>> cases(const std::string& dir) {
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> all;
  for (int task = 0; task < 2; ++task) {
    const std::string file = config_file(dir, task == 1);
    const int options = task == 0 ? 5 : 3;
    for (int bits = 0; bits < (1 << options); ++bits) {
      auto on = [&](int i) { return ((bits >> i) & 1) != 0; };
      std::vector<std::string> o = {std::string("model.transformer=") + (on(0) ? "false" : "true"),
                                    std::string("model.cross_attention=") + (on(1) ? "false" : "true")};
      if (on(2)) o.push_back("estimator.method=\"prob_scale\"");
      if (task == 0) {
        o.push_back(std::string("model.unmerge=") + (on(3) ? "\"mirror\"" : "\"policy\""));
        o.push_back(std::string("model.leaf_classifier=") + (on(4) ? "true" : "false"));
      }
      std::string name = task == 0 ? "reconstruct" : "classify";
      for (const auto& s : o) name += " " + s;
      all[name] = {file, o};
    }
  }
  return all;
}

const std::string kGoldenFile = std::string(HTM_SOURCE_DIR) + "/tests/data/golden_model.txt";

// This CPU: /proc/cpuinfo's model name and the vector extensions the kernels choose by.
std::string cpu_class() {
  std::ifstream in("/proc/cpuinfo");
  std::string model = "unknown CPU", flags;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = line.substr(colon + 2);
    if (line.rfind("flags", 0) == 0 && flags.empty()) flags = " " + line.substr(colon + 2) + " ";
  }
  // Capped below AVX-512 (ATEN_CPU_CAPABILITY=avx2, with ONEDNN_MAX_CPU_ISA=AVX2 and
  // OPENBLAS_CORETYPE=Haswell: scripts/golden.sh), the kernels compute what an AVX2 CPU's do.
  const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
  const bool capped = cap != nullptr && *cap != '\0' && std::string(cap) != "avx512";
  std::string isa;
  for (const char* f : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos &&
        !(capped && std::string(f) != "avx2" && std::string(f) != "fma"))
      isa += std::string(isa.empty() ? "" : " ") + f;
  return model + " [" + isa + "]" + (native_kernels_built() ? "" : " portable-only build");
}

std::map<std::string, std::string> read_golden() {
  std::map<std::string, std::string> golden;
  std::ifstream in(kGoldenFile);
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.rfind('\t');
    if (line.empty() || line[0] == '#' || tab == std::string::npos) continue;
    golden[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return golden;
}

// The libtorch this build uses: the file's digests are one libtorch's (another's ops give other
// bits), named on its `libtorch` line.
std::string libtorch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

TEST(GoldenModel, EveryArchitectureGivesItsPinnedDigestBitForBit) {
  const std::string dir = htm::testing::fresh_dir("golden");
  std::vector<Kernels> sets = {Kernels::portable, Kernels::gpu};
  if (native_kernels_built()) sets.insert(sets.begin(), Kernels::native);
  const char* write = std::getenv("HTM_GOLDEN_WRITE");
  const std::string cpu = cpu_class(), torch_version = libtorch_version();
  std::map<std::string, std::string> golden = read_golden(), now;
  if (golden.count("libtorch") && golden["libtorch"] != torch_version) {
    if (write == nullptr)
      GTEST_SKIP() << "skipped: the digests in " << kGoldenFile << " are libtorch " << golden["libtorch"]
                   << "'s; this build's is " << torch_version << " (its ops give other bits)";
    golden.clear();  // written under another libtorch: the old one's digests go
  }
  golden["libtorch"] = torch_version;
  bool pinned = false;
  for (const auto& entry : golden) pinned = pinned || entry.first.rfind(cpu + "\t", 0) == 0;
  if (write == nullptr && !pinned)
    GTEST_SKIP()
        << "skipped: no digests pinned for this CPU (" << cpu << ") in " << kGoldenFile
        << "; pin them from a build that is known good: HTM_GOLDEN_WRITE=1 htm_tests --gtest_filter='GoldenModel.*'";
  int valid = 0;
  for (Kernels kernels : sets)
    for (const auto& [name, c] : cases(dir)) {
      const std::string key = cpu + "\t" + kernels_name(kernels) + " " + name;
      now[key] = digest_of(c.first, c.second, kernels);
      if (now[key].rfind("invalid: ", 0) != 0) ++valid;
      if (write == nullptr) {
        ASSERT_TRUE(golden.count(key)) << key << ": no pinned digest (" << kGoldenFile << ")";
        EXPECT_EQ(now[key], golden[key]) << key;
      }
    }
  EXPECT_GE(valid, 20) << "most combinations should assemble and train";
  if (write != nullptr) {  // a build without the native kernels keeps the native lines it cannot compute
    for (const auto& [key, value] : now) golden[key] = value;
    std::ofstream out(kGoldenFile);
    out << "# tests/golden_test.cpp: the CPU, the kernels, task and option overrides, then the digest (or\n"
        << "# why the combination is invalid), under the libtorch its line names. Written by\n"
        << "# HTM_GOLDEN_WRITE=1; never edited by hand.\n";
    for (const auto& [key, value] : golden) out << key << '\t' << value << '\n';
  }
}

}  // namespace
}  // namespace htm
