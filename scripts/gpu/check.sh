#!/usr/bin/env bash
# The checks a CUDA machine must pass (docs/gpu.md), in one script, most needed first:
#   - build htm against the machine's libtorch (a CUDA one) without the native CPU kernels;
#   - the kernel tests on the GPU (htm's CUDA kernels first: the pair sampler's, the set
#     assignment's; then CudaKernels.*, GpuKernels.*, PortableKernels.*, StepGraph.*, and a run
#     resumed on the GPU with graphs: Resume.OnAGpu*); which fused attention torch runs for htm's
#     shapes, and what it keeps (scripts/gpu/sdpa_probe.py);
#   - issue 38's figures: `htm bench` at the paper's size on cuda, B = 64 and 8, fp32 eager and
#     replayed from a CUDA graph (runtime.cuda_graph), bf16 replayed, with the GPU's peak allocated
#     memory, beside the paper's official code (HTM_OFFICIAL) on the same GPU; the graph's step
#     with runtime.recompute = "mlp" (and, in the full check, the eager one with "blocks"); the
#     quickstart with and without graphs, Trees rloo_long's step eager and replayed, and a run with
#     graphs;
#   - what the step's parts cost: the allocator's share (expandable segments), each CUDA kernel
#     against its torch ops, the sampler's rounds capped; the replays' losses against eager steps;
#   - a profile of one B = 64 step (the ops that take the time, in profile-top.txt), and the
#     portable kernels on the same GPU;
#   - the unit tests (on the host CPU: the portable kernels);
#   - Trees `rloo_long` (with graphs) and the quickstart on cuda, 3 seeds each, and the PyTorch
#     reference port.
# A step that fails is reported and the next one still runs; summary.txt lists them all.
#
# Usage: scripts/gpu/check.sh [OUT]          OUT: a folder for the logs (default: gpu-check)
# Environment (all optional):
#   TORCH_PREFIX  a libtorch's CMake prefix; default: the one inside python3's torch
#   HTM_DEPS      .debs from `scripts/gpu/offline-deps.sh download`, for a machine without a
#                 package manager: unpacked into /tmp/htm-deps first
#   HTM_FASHION_MNIST  a Fashion-MNIST folder (default: Debian's package's); without one, the
#                 quickstart is skipped and the tests that read it skip themselves
#   HTM_OFFICIAL  a Python script that times the paper's official code's training step
#                 (`--device cuda --batch B --steps N`, printing a line `official B=… median_ms=…
#                 peak_alloc_mib=…`): bench/official/time_official.py, which reads the official
#                 code from HTM_OFFICIAL_SOURCE or .official/ (scripts/gpu/prepare.sh puts it there)
#   HTM_BUDGET    seconds for the whole script (0: none): a step that cannot finish in what is
#                 left runs under a shorter limit, or is skipped below 20 s
#   HTM_QUICK     1: only the build, the kernel tests, the bench table beside the official code,
#                 the quickstart with and without graphs, and Trees rloo_long (its step eager and
#                 replayed, one run with graphs)
#   JOBS          build and test jobs (default: every core)
#   HTM_BUILD_DIR the build folder (default: build-gpu)
#   HTM_REHEARSE  1: the same steps on a machine without a GPU, to find the script's own faults
#                 before a lease (docs/gpu.md): runtime.device "cpu" with the gpu kernels, CUDA
#                 graphs "eager" (the graphs' draws, no graph), 2 timed steps a bench, shorter runs,
#                 the official code on the CPU; no nvidia-smi. Its figures are not a GPU's
#   HTM_COMMIT    the commit the working tree is, for environment.txt: a copy of the tree (the
#                 device tool's) can carry a .git that lags it, and `git log` then names an older
#                 commit; pass HTM_COMMIT=$(git rev-parse HEAD) from the checkout it was copied from
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=$(mkdir -p "${1:-gpu-check}" && cd "${1:-gpu-check}" && pwd)
JOBS=${JOBS:-$(nproc)}
BUILD=${HTM_BUILD_DIR:-build-gpu}
BUDGET=${HTM_BUDGET:-0}
FASHION=${HTM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
REHEARSE=${HTM_REHEARSE:-0}
# A folder used before starts empty of this script's outputs: its logs are appended to and its runs'
# databases would skip the runs they hold as done.
rm -f "$OUT"/*.log "$OUT"/*.sqlite "$OUT"/profile.json* "$OUT"/profile-top.txt
: > "$OUT/summary.txt"

# step NAME LOG SECONDS COMMAND...: runs COMMAND with a time limit, appending to OUT/LOG.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  if [ "$BUDGET" -gt 0 ] && [ $((SECONDS + limit)) -gt "$BUDGET" ]; then
    limit=$((BUDGET - SECONDS - 5))
    if [ "$limit" -lt 20 ]; then
      printf '%-34s %s\n' "$name" "skipped (the time budget is spent)" | tee -a "$OUT/summary.txt"
      return 1
    fi
  fi
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
  if [ -n "${HTM_COMMIT:-}" ]; then echo "commit $HTM_COMMIT (HTM_COMMIT)"; else git log -1 --format='commit %H (git log: the copy'"'"'s .git)' 2> /dev/null; fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)' 2>&1
  g++ --version | head -1
  cmake --version | head -1
  nvcc --version 2> /dev/null | tail -1
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
  -DHTM_NATIVE_KERNELS=OFF ${prefix:+-DCMAKE_PREFIX_PATH="$prefix"} || {
  tail -40 "$OUT/build.log"
  exit 1
}
grep -E "HTM_CUDA_(STATS|GRAPHS|GRAPH_NODES)_OK" "$BUILD/CMakeCache.txt" >> "$OUT/summary.txt"
grep -h "^-- htm: " "$OUT/build.log" | head -3 >> "$OUT/summary.txt"  # htm's own CUDA kernels: built or why not
if ! step build build.log 1800 cmake --build "$BUILD" -j "$JOBS"; then
  # Built again without htm's own CUDA kernels (core/src/kernels/*.cu), so the rest is still measured.
  grep -B2 -A12 -m3 "error" "$OUT/build.log" | tail -60
  step "configure without htm's CUDA kernels" build.log 300 cmake -S . -B "$BUILD" -DHTM_CUDA_KERNELS=OFF &&
    step "build without htm's CUDA kernels" build.log 1800 cmake --build "$BUILD" -j "$JOBS" || exit 1
fi
htm=$BUILD/htm
cuda=(--set 'runtime.device="cuda"')
graph=(--set 'runtime.cuda_graph="on"')
device=cuda steps=10 shorter=() smaller=()
if [ "$REHEARSE" = 1 ]; then  # the GPU's steps on the CPU: the same ops, no graph
  cuda=(--set 'runtime.device="cpu"' --set 'runtime.kernels="gpu"')
  graph=(--set 'runtime.cuda_graph="eager"')
  device=cpu steps=2 shorter=(--set 'train.epochs=1' --set 'train.train_samples=1024' --set 'train.eval_samples=512')
  smaller=(--set 'train.batch_size=2')  # the last setting of a key wins: the paper's size at B = 2
  echo "REHEARSAL: on the CPU, no GPU figure" | tee -a "$OUT/summary.txt"
fi

# 2. The kernels on the GPU against the CPU and their definitions.
# htm's own CUDA kernels first, each against the CPU's answer; where one fails, the rest runs with
# its torch ops (VARIABLE=0), and summary.txt says so.
# kernel_first NAME VARIABLE GTEST_FILTER
kernel_first() {
  step "$1 kernel on the GPU" kernels.log 60 "$BUILD/tests/htm_tests" --gtest_filter="$3" && return 0
  export "$2=0"
  echo "$2=0 from here on: the $1 kernel did not give the CPU's answers" | tee -a "$OUT/summary.txt"
}
kernel_first "pair sampler" HTM_CUDA_MATCHING 'CudaKernels.Matching*:GreedyMatching.*'
kernel_first "set assignment" HTM_CUDA_ASSIGNMENT 'DeviceAssignment.*'
kernel_first "log-probability and entropy" HTM_CUDA_LOGPROB 'PairLogProb*'
kernel_first "kept tokens" HTM_CUDA_KEPT 'KeptTokens.*'
step "kernel tests on the GPU" kernels.log 120 "$BUILD/tests/htm_tests" \
  --gtest_filter='CudaKernels.*:GpuKernels.*:PortableKernels.*:StepGraph.*:EvalGraph*:LaterRead.*:Resume.OnAGpu*:GpuGradients*:LaunchCount.*:DeviceTimer*-CudaKernels.Matching*'

# Which fused attention torch runs for htm's attention at the paper's size (memory-efficient, or
# the math path that keeps the weights and their dropout mask), and what each keeps: bench.log.
step "sdpa probe" bench.log 60 python3 scripts/gpu/sdpa_probe.py --device "$device" \
  --batch "$([ "$REHEARSE" = 1 ] && echo 2 || echo 8)"

# 3. The paper-size step: htm (gpu kernels) beside the official code, fp32 and bf16.
# smi NAME COMMAND...: runs COMMAND while nvidia-smi samples the GPU's used memory (the whole
# card's, CUDA context included), and logs the most it saw.
smi() {
  local name=$1 pid rc
  shift
  command -v nvidia-smi > /dev/null || { "$@"; return; }
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$OUT/smi.tmp" 2> /dev/null &
  pid=$!
  "$@"
  rc=$?
  kill "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  echo "smi      $name: the card's used memory peaked at $(sort -n "$OUT/smi.tmp" | tail -1) MiB" >> "$OUT/bench.log"
  rm -f "$OUT/smi.tmp"
  return $rc
}
# bench NAME ARGS...: htm bench on the run's device; BENCH_ENV=VAR=VALUE bench ... runs it with VAR set.
bench() {
  smi "$1" step "$1" bench.log 150 env ${BENCH_ENV:-} "$htm" bench --steps "$steps" --step-only "${cuda[@]}" "${@:2}" \
    "${smaller[@]}"
}
official() {
  [ -n "${HTM_OFFICIAL:-}" ] || return 0
  smi "official B=$1" step "official code B=$1" bench.log 150 python3 "$HTM_OFFICIAL" --device "$device" \
    --batch "$([ "$REHEARSE" = 1 ] && echo 2 || echo "$1")" \
    --steps "$steps"
}
for B in 64 8; do
  bench "htm bench cuda fp32 B=$B" --set "train.batch_size=$B" --census  # what holds the memory (bench.log)
  bench "htm bench cuda fp32 graph B=$B" --set "train.batch_size=$B" "${graph[@]}"
  official "$B"
  bench "htm bench cuda bf16 graph B=$B" --set "train.batch_size=$B" --set 'runtime.precision="bf16"' "${graph[@]}"
done
# The graph's step with its MLPs' hidden activations made again in backward (runtime.recompute =
# "mlp": nothing drawn, so at dropout 0.1): its time and allocated memory against the official
# code's, the issue's memory target being half.
for B in 64 8; do
  bench "htm bench cuda fp32 graph recompute-mlp B=$B" --set "train.batch_size=$B" --set 'runtime.recompute="mlp"' \
    "${graph[@]}"
done
# The eager step with the blocks recomputed in backward (runtime.recompute = "blocks"); without
# dropout the recomputed blocks combine with a graph: its pool with and without them (B=64,
# model.dropout=0 both; the full check only: the official code keeps its 0.1).
if [ "${HTM_QUICK:-0}" != 1 ]; then
  for B in 64 8; do
    bench "htm bench cuda fp32 recompute B=$B" --set "train.batch_size=$B" --set 'runtime.recompute="blocks"'
  done
  bench "htm bench cuda fp32 graph nodrop B=64" --set "train.batch_size=64" --set 'model.dropout=0' "${graph[@]}"
  bench "htm bench cuda fp32 graph recompute nodrop B=64" --set "train.batch_size=64" --set 'model.dropout=0' \
    --set 'runtime.recompute="blocks"' "${graph[@]}"
fi
# The quickstart on cuda with and without graphs, one seed each, the run results/quickstart-cpu-*.csv
# times on one CPU core (10,000 images: 314 steps, a logged step every 10): images/s and test MSE
# in runs.log.
if [ -f "$FASHION/train-images-idx3-ubyte.gz" ]; then
  for g in on off; do
    mode=$g
    [ "$REHEARSE" = 1 ] && [ "$g" = on ] && mode=eager
    step "quickstart cuda graph=$g" runs.log 120 "$htm" run experiments/quickstart.toml -s 0 --tag "graph=$g" \
      --set "runtime.cuda_graph=\"$mode\"" --set "runtime.results=\"$OUT/graphs.sqlite\"" \
      --set 'runtime.artifacts="/tmp/htm-gpu-graphs"' "${cuda[@]}" --set "dataset.root=\"$FASHION\"" \
      --set 'train.train_samples=10000' "${shorter[@]}" --quiet
  done
fi
# Trees rloo_long on cuda with graphs, one seed (the point-set matching on the device since
# 2026-11-27; lease 1 ran it eagerly at 404 img/s a run, 3 at once), and its step alone, eager and
# replayed: the run's time less its steps' is its evaluations'.
trees=(--config experiments/htm/policy.toml --variant rloo_long)
bench "htm bench cuda trees eager" "${trees[@]}"
bench "htm bench cuda trees graph" "${trees[@]}" "${graph[@]}"
step "trees rloo_long cuda graph=on" runs.log 150 "$htm" run experiments/htm/policy.toml --variant rloo_long -s 0 \
  --tag graph=on "${graph[@]}" --set "runtime.results=\"$OUT/graphs.sqlite\"" \
  --set 'runtime.artifacts="/tmp/htm-gpu-graphs"' "${cuda[@]}" "${shorter[@]}" --quiet
grep -hE "finished:|cuda graph:|\] time:" "$OUT/runs.log" | tee -a "$OUT/summary.txt"

# 3b. What the step's parts cost (after the targets' figures above, so a short budget skips these
# first): the allocator's share, the sampler's and the set assignment's kernels against their torch
# ops, the rounds' cap, and the graph's replays against eager steps.
# The caching allocator's own share of "allocated": it rounds each block up and gives a large
# block whole when what would be left is under 1 MiB; with expandable segments it splits any
# block (the `requested` line on each bench says what the tensors asked for). Eager at B = 8 and
# 64 with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, against the first two benches above.
for B in 8 64; do
  BENCH_ENV=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True bench "htm bench cuda fp32 expandable B=$B" \
    --set "train.batch_size=$B"
done
# Eager at B = 8 with torch's math attention left out (HTM_SDPA_MATH=0): its allocated memory
# against the default's, should torch pick the math path, which keeps each attention's weights
# (scripts/gpu/sdpa_probe.py above says which it picks).
BENCH_ENV=HTM_SDPA_MATH=0 bench "htm bench cuda fp32 sdpa-no-math B=8" --set "train.batch_size=8"
# The graph's step with htm's CUDA kernels (where built) replaced by their torch ops: the pair
# sampler's rounds, its exact log-probability's and entropy's ops, the kept tokens' sort (and the
# set assignment's layers, on Trees below): what the kernels save together.
kernels_off="HTM_CUDA_MATCHING=0 HTM_CUDA_LOGPROB=0 HTM_CUDA_ASSIGNMENT=0 HTM_CUDA_KEPT=0"
BENCH_ENV=$kernels_off bench "htm bench cuda fp32 graph torch-ops B=64" --set "train.batch_size=64" "${graph[@]}"
# The captured sampler's rounds capped at 32 (lease 5 ran 4 log2 T: 32, 28, 24, ... at most T/2,
# enough for this untrained model's near-random logits), against the floor(T/2) of the default,
# which a trained policy needs: what the robust default costs here.
bench "htm bench cuda fp32 graph rounds-capped B=64" --set "train.batch_size=64" --set 'runtime.graph_rounds=32' \
  "${graph[@]}"
# Trees' graph with the three kernels' torch ops (at T = 16; the set matching's layers: 84 launches
# and 512 MiB of gathered terms in double a step).
BENCH_ENV=$kernels_off bench "htm bench cuda trees graph torch-ops" "${trees[@]}" "${graph[@]}"
# The graph's replays against the same steps run eagerly with its draws: the same losses to rounding.
bench "htm bench cuda fp32 graph-eager B=8" --set "train.batch_size=8" --set 'runtime.cuda_graph="eager"'
losses_of() {  # the losses line of the bench step named $1
  awk -v n="=== $1:" 'index($0, n) == 1 {on = 1; next} /^=== / {on = 0} on && /^losses / {$1 = $2 = $3 = ""; print}' \
    "$OUT/bench.log"
}
python3 - "$(losses_of "htm bench cuda fp32 graph B=8")" "$(losses_of "htm bench cuda fp32 graph-eager B=8")" << 'EOF' |
import sys
a, b = ([float.fromhex(x) for x in arg.split()] for arg in sys.argv[1:3])
worst = max((abs(x - y) / abs(y) for x, y in zip(a, b)), default=float("nan"))
print(f"graph replays against eager steps (B=8): {len(a)} and {len(b)} losses, most relative difference {worst:.2e}")
EOF
  tee -a "$OUT/summary.txt"
# htm's CUDA kernels under NVIDIA's compute-sanitizer, where the image has it and the machine lets
# it run (KINDS.md: on Firecracker, not gVisor): racecheck for shared-memory hazards, memcheck for
# out-of-bounds accesses. Their CPU emulation (tests/cuda_emulation.h) draws the threads' order
# between barriers; a race inside one stretch between barriers is the sanitizer's to find.
sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ "$REHEARSE" != 1 ] && [ -x "$sanitizer" ]; then
  for tool in racecheck memcheck; do
    step "compute-sanitizer $tool" kernels.log 90 "$sanitizer" --tool "$tool" --error-exitcode 9 \
      "$BUILD/tests/htm_tests" --gtest_filter='CudaKernels.Matching*:DeviceAssignment.*:PairLogProbOnAGpu.*:KeptTokens.*'
  done
fi
if [ "${HTM_QUICK:-0}" = 1 ]; then  # the bench table alone
  grep -hE "^(summary|memory|gputime|launches|official|smi|graph|sdpa) |^census .*(one eager step|before the step)" "$OUT/bench.log" |
    tee -a "$OUT/summary.txt"
  python3 scripts/gpu/targets.py "$OUT" | tee -a "$OUT/summary.txt"  # issue 38's ratios, each beside its target
  exit 0
fi

# 4. Where one B = 64 step spends its time; the portable kernels on the same GPU (the before).
if step "profile B=64" bench.log 120 "$htm" bench --steps "$((steps < 3 ? steps : 3))" --step-only "${cuda[@]}" --set 'train.batch_size=64' \
  "${smaller[@]}" --profile "$OUT/profile.json"; then
  python3 - "$OUT/profile.json" > "$OUT/profile-top.txt" << 'EOF'
import collections, json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
total = collections.Counter(); calls = collections.Counter()
for e in events:
    if e.get("ph") == "X":
        total[e["name"]] += e.get("dur", 0); calls[e["name"]] += 1
for name, us in total.most_common(40):
    print(f"{us / 1000:10.1f} ms  {calls[name]:6d} calls  {name}")
EOF
  gzip -f "$OUT/profile.json"
fi
bench "htm bench cuda portable B=64" --set 'train.batch_size=64' --set 'runtime.kernels="portable"'

# 5. The unit tests (on the host CPU; format.check needs clang-format, which a GPU image may lack).
step "unit tests" unit.log 300 ctest --test-dir "$BUILD" -L unit -j "$JOBS" -E 'format\.check' --timeout 240 \
  --output-on-failure

# 6. Whole runs on cuda: 3 seeds each, at once on the one GPU (--jobs 3).
results=(--set "runtime.results=\"$OUT/runs.sqlite\"" --set 'runtime.artifacts="/tmp/htm-gpu-runs"')
step "trees rloo_long cuda graph x3" runs.log 300 "$htm" run experiments/htm/policy.toml --variant rloo_long \
  -s 0 -s 1 -s 2 --jobs 3 "${results[@]}" "${cuda[@]}" "${graph[@]}" "${shorter[@]}" --quiet
if [ -f "$FASHION/train-images-idx3-ubyte.gz" ]; then
  step "quickstart cuda graph x3" runs.log 300 "$htm" run experiments/quickstart.toml -s 0 -s 1 -s 2 --jobs 3 \
    "${results[@]}" "${cuda[@]}" "${graph[@]}" --set "dataset.root=\"$FASHION\"" --set 'train.train_samples=10000' \
    "${shorter[@]}" --quiet
fi
[ -f "$OUT/runs.sqlite" ] && "$htm" runs --db "$OUT/runs.sqlite" >> "$OUT/runs.log" 2>&1
step "reference port B=64" bench.log 150 python3 bench/reference/reference.py --device "$device" --steps "$steps" \
  --batch "$([ "$REHEARSE" = 1 ] && echo 2 || echo 64)"

grep -hE "^(summary|memory|gputime|launches|reference|official|smi|graph|sdpa) |^census .*(one eager step|before the step)" "$OUT/bench.log" |
  tee -a "$OUT/summary.txt"
python3 scripts/gpu/targets.py "$OUT" | tee -a "$OUT/summary.txt"  # issue 38's ratios, each beside its target
grep -E "tests passed|tests failed" "$OUT/unit.log" 2> /dev/null | tee -a "$OUT/summary.txt"
grep -A20 "FAILED TEST\|The following tests FAILED" "$OUT/kernels.log" "$OUT/unit.log" 2> /dev/null | head -40 |
  tee -a "$OUT/summary.txt"
exit 0
