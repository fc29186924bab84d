#!/usr/bin/env bash
# The Python route's cost: a training step with the bilinear policy written in PyTorch (the
# torchscript plugin, docs/examples/python_policy) against the same policy in C++ (`bilinear`),
# at the Trees size (experiments/htm/trees.toml, rloo_long: width 16, B = 16, T = 16, 4 rollouts)
# and at the paper's size (experiments/bench/paper_size.toml: width 256). One thread; the two are
# timed alternately, ROUNDS times each, and the medians and their ratio printed.
#   usage: scripts/research/python_policy_bench.sh [ROUNDS]   (default 3; from the repository root)
set -euo pipefail
ROUNDS=${1:-3}
HTM=${HTM:-./build/htm}
PY=${HTM_PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d /tmp/htm-python-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
"$PY" docs/examples/python_policy/bilinear_policy.py --dim 16 -o "$WORK/policy16.pt"
"$PY" docs/examples/python_policy/bilinear_policy.py --dim 256 -o "$WORK/policy256.pt"
step_ms() {  # bench args... -> the step's milliseconds
  local out
  out=$("$HTM" bench --threads 1 --step-only "$@" 2>&1) || { echo "htm bench $*: $(tail -2 <<< "$out")" >&2; exit 1; }
  awk '/^summary/ { for (i = 1; i < NF; i++) if ($(i + 1) == "ms") print $i }' <<< "$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
compare() {  # label dim bench-args...
  local label=$1 dim=$2 cpp=() py=()
  shift 2
  for _ in $(seq 1 "$ROUNDS"); do
    cpp+=("$(step_ms "$@" --set 'policy.plugin="bilinear"')")
    py+=("$(step_ms "$@" --set 'policy.plugin="torchscript"' --set "policy.path=\"$WORK/policy$dim.pt\"")")
  done
  local c p
  c=$(printf '%s\n' "${cpp[@]}" | median)
  p=$(printf '%s\n' "${py[@]}" | median)
  printf '%-12s C++ bilinear %8.2f ms   PyTorch (torchscript) %8.2f ms   ratio %.3f   (medians of %d; C++ %s; Python %s)\n' \
    "$label" "$c" "$p" "$(awk -v a="$p" -v b="$c" 'BEGIN { print a / b }')" "$ROUNDS" "${cpp[*]}" "${py[*]}"
}
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, 1 thread"
compare "Trees" 16 --config experiments/htm/trees.toml --variant rloo_long --steps 20
compare "paper size" 256 --steps 5
