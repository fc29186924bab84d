#!/usr/bin/env bash
# The checks a CUDA machine must pass (docs/gpu.md), in one script:
#   - build htm against the machine's libtorch (a CUDA one) without the native CPU kernels;
#   - the kernel tests on the GPU (CudaKernels.*: masks bit for bit, values and gradients
#     against the CPU, the pair sampler's distribution);
#   - `htm bench` at the paper's size on cuda (B = 8 and 64, fp32 and bf16) beside the PyTorch
#     reference port (bench/reference) on the same GPU;
#   - the quickstart on cuda, and the same run on the CPU;
#   - the unit tests (on the CPU: the portable kernels).
# A step that fails is reported and the next one still runs; summary.txt lists them all.
#
# Usage: scripts/gpu/check.sh [OUT]          OUT: a folder for the logs (default: gpu-check)
# Environment (all optional):
#   TORCH_PREFIX  a libtorch's CMake prefix; default: the one inside python3's torch
#   HTM_DEPS      .debs from `scripts/gpu/offline-deps.sh download`, for a machine without a
#                 package manager: unpacked into /tmp/htm-deps first
#   HTM_FASHION   a Fashion-MNIST folder for the quickstart (default: Debian's package's)
#   HTM_QUICK     1: only the build, the GPU kernel tests, the B = 8 bench lines and the quickstart
#   JOBS          build and test jobs (default: every core)
#   HTM_BUILD_DIR the build folder (default: build-gpu)
#   HTM_BUILD_SECONDS  the build's time limit (default 1800)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:-gpu-check}" && cd "${1:-gpu-check}" && pwd)
JOBS=${JOBS:-$(nproc)}
BUILD=${HTM_BUILD_DIR:-build-gpu}
FASHION=${HTM_FASHION:-/usr/share/datasets/fashion-mnist}
: > "$OUT/summary.txt"

# step NAME LOG SECONDS COMMAND...: runs COMMAND with a time limit, appending to OUT/LOG.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local t0=$SECONDS rc
  echo "=== $name: $*" >> "$OUT/$log"
  timeout --kill-after=10 "$limit" "$@" >> "$OUT/$log" 2>&1
  rc=$?
  local verdict="ok"
  [ $rc -eq 0 ] || verdict="FAILED (exit $rc$([ $rc -eq 124 ] && echo ", over ${limit} s"))"
  printf '%-34s %s  %4d s\n' "$name" "$verdict" $((SECONDS - t0)) | tee -a "$OUT/summary.txt"
  return $rc
}

{
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)' 2>&1
  g++ --version | head -1
  cmake --version | head -1
  nvcc --version 2>/dev/null | tail -1
  lscpu | grep "Model name"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

if [ -n "${HTM_DEPS:-}" ]; then
  eval "$(scripts/gpu/offline-deps.sh unpack "$HTM_DEPS" /tmp/htm-deps)" || exit 1
  DEPS_PREFIX=/tmp/htm-deps/usr
fi
# A pip torch's libtorch unless TORCH_PREFIX names one; neither: CMake's own search (Debian's).
TORCH_PREFIX=${TORCH_PREFIX:-$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2> /dev/null)}
prefix="$TORCH_PREFIX${DEPS_PREFIX:+;$DEPS_PREFIX}"
generator=()
[ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja > /dev/null && generator=(-G Ninja)

# 1. Build.
step configure build.log 300 cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DHTM_NATIVE_KERNELS=OFF ${prefix:+-DCMAKE_PREFIX_PATH="$prefix"} || exit 1
step build build.log "${HTM_BUILD_SECONDS:-1800}" cmake --build "$BUILD" -j "$JOBS" || {
  tail -60 "$OUT/build.log"
  exit 1
}
htm=$BUILD/htm

# The steps in the order of what they answer, most needed first: a time limit on the whole
# script (a lent GPU) then cuts the least needed.
step "kernel tests on the GPU" cuda.log 180 "$BUILD/tests/htm_tests" --gtest_filter='CudaKernels.*:PortableKernels.*'
step "htm bench cuda fp32" bench.log 180 "$htm" bench --steps 10 --step-only --set 'runtime.device="cuda"'
step "reference cuda" bench.log 180 python3 bench/reference/reference.py --device cuda --steps 10
results=(--set "runtime.results=\"$OUT/quickstart.sqlite\"" --set "runtime.artifacts=\"/tmp/htm-gpu-runs\""
  --set "dataset.root=\"$FASHION\"")
step "quickstart cuda" cuda.log 300 "$htm" run experiments/quickstart.toml "${results[@]}" \
  --set 'runtime.device="cuda"' --set 'experiment.name="quickstart-cuda"'
if [ "${HTM_QUICK:-0}" != 1 ]; then
  step "htm bench cuda B=64" bench.log 180 "$htm" bench --steps 10 --step-only --set 'runtime.device="cuda"' \
    --set 'train.batch_size=64'
  step "reference cuda B=64" bench.log 180 python3 bench/reference/reference.py --device cuda --steps 10 --batch 64
  step "htm bench cuda bf16" bench.log 180 "$htm" bench --steps 10 --step-only --set 'runtime.device="cuda"' \
    --set 'runtime.precision="bf16"'
  # The unit tests (format.check needs clang-format, which a GPU image may lack).
  step "unit tests" unit.log 600 ctest --test-dir "$BUILD" -L unit -j "$JOBS" -E 'format\.check' --timeout 300
  # The same quickstart on the CPU: the same seed, so the same random draws.
  step "quickstart cpu (portable)" cuda.log 600 "$htm" run experiments/quickstart.toml "${results[@]}" \
    --set 'runtime.kernels="portable"' --set 'experiment.name="quickstart-cpu"'
  step "htm bench cpu (portable)" bench.log 300 "$htm" bench --steps 5 --step-only --threads "$JOBS"
fi
grep -h "finished:" "$OUT/cuda.log" | tee -a "$OUT/summary.txt"
grep -hE "^(summary|memory|reference) " "$OUT/bench.log" | tee -a "$OUT/summary.txt"
grep -E "tests passed|tests failed" "$OUT/unit.log" 2> /dev/null | tee -a "$OUT/summary.txt"
