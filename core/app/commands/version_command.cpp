// `htm version`: what a bug report needs of this build in one block: htm's version and revision,
// the libtorch it links, the kernel backends it has, the CPU's bf16 hardware and whether a GPU is
// usable. (`htm --version` prints the first line alone.)
#include <cstdio>
#include <string>

#include <torch/version.h>

#include "commands/command_registry.h"
#include "commands/runner.h"
#include "config/device.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"

namespace htm {
namespace {

int cmd_version(const Args& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "error: htm version takes no arguments (got '%s')\n", args[0].c_str());
    return 2;
  }
  std::printf("htm %s (git revision %s)\n", HTM_VERSION, git_revision().c_str());
  std::printf("libtorch %s\n", TORCH_VERSION);
  std::printf("kernels: portable, gpu%s (runtime.kernels; default %s)\n",
              native_kernels_built() ? ", native" : " (no native: built without HTM_NATIVE_KERNELS)",
              kernels_name(kernels()).c_str());
  std::printf("bf16 hardware: %s\n", bf16_hardware().c_str());
  std::printf("cuda: %s\n", cuda_usable() ? "usable" : "not usable (a CPU-only libtorch, or no GPU seen)");
  return 0;
}

const RegisterCommand register_version(160, "version", "this build: htm, libtorch, kernels, bf16 and CUDA",
                                       cmd_version);

}  // namespace
}  // namespace htm
