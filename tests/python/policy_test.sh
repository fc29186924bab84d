#!/usr/bin/env bash
# A merge policy and merge operators written in PyTorch (plugins/policy/torchscript,
# plugins/merge/torchscript), end to end: the example modules (docs/examples/python_policy)
# scripted by Debian's python3-torch; a module of another width refused with one line; 2 epochs of Trees inside
# `htm run` with both (the gradient reaches each, their weights move);
# kill -9 after a checkpoint and the same command resumes to the uninterrupted run's metrics bit
# for bit; --nproc 2 matches one process; `htm check-plugin --param path=...` passes.
#   usage: policy_test.sh HTM_BINARY SOURCE_DIR PYTHON
set -uo pipefail
HTM=$(realpath "$1")
SRC=$(realpath "$2")
PY=$3
if ! "$PY" -c "import torch" 2> /dev/null; then
  echo "skipped: $PY has no torch (install Debian's python3-torch)"
  exit 77
fi
WORK=$(mktemp -d /tmp/htm-python-policy.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
sql() { sqlite3 -cmd ".timeout 5000" "$1" "$2"; }  # a killed run's child may still hold the lock a moment
EXAMPLE=$SRC/docs/examples/python_policy/bilinear_policy.py
STUDY=$SRC/tests/faults/tiny.toml  # Trees, width 16, 32 steps an epoch
# One run of the study's learned variant with the Python policy and merge operator:
#   run DB ARTIFACTS POLICY_MODULE [ARGS...]
run() {
  "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=2 --set policy.plugin='"torchscript"' \
    --set "policy.path=\"$3\"" --set merge.plugin='"torchscript"' --set "merge.path=\"$WORK/merge.pt\"" \
    --set "runtime.results=\"$1\"" --set "runtime.artifacts=\"$2\"" "${@:4}"
}
series() {  # every metric of run 1 but the timing, as text
  sql "$1" "SELECT split, name, step, printf('%.17g', value) FROM metrics WHERE run_id = 1
            AND name != 'images_per_s' ORDER BY split, name, step"
}

# The examples, scripted in one interpreter (each start imports torch: about a second): the policy
# and the merge operator at the study's width, the policy at width 8 for the refusal below.
"$PY" - "$(dirname "$EXAMPLE")" << 'PY' || fail "the examples did not script"
import sys, torch
sys.path.insert(0, sys.argv[1])
from bilinear_policy import BilinearPolicy
from mlp_merge import MlpMerge
torch.manual_seed(0)
for module, path in ((BilinearPolicy(16), "policy.pt"), (MlpMerge(16), "merge.pt"), (BilinearPolicy(8), "width8.pt")):
    torch.jit.script(module).save(path)
PY

# ---- a bad module as a user meets it: one line and a non-zero exit from htm run (every other
# refusal, in process: TorchScriptRefusals.*)
out=$(run bad.sqlite bad-runs "$WORK/width8.pt" 2>&1)
rc=$?
want="width8.pt: forward failed on tokens of shape [1, 4, 16]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x16 and 8x8)"
[[ $rc != 0 ]] || fail "htm run accepted a module built for width 8"
[[ $(grep -c . <<< "$out") == 1 ]] && grep -qF -- "$want" <<< "$out" || fail "expected one line with '$want', got: $out"
echo "refused: $out"

# ---- 2 epochs of Trees: the gradient reaches the policy and the merge operator, their weights move
run ref.sqlite ref-runs "$WORK/policy.pt" > ref.log 2>&1 || fail "the reference run failed: $(tail -2 ref.log)"
for block in policy merge; do
  norm=$(sql ref.sqlite "SELECT max(value) FROM metrics WHERE split = 'train' AND name = 'grad_norm/$block'")
  awk -v n="${norm:-0}" 'BEGIN { exit !(n > 0) }' || fail "grad_norm/$block is '$norm', not > 0"
  echo "grad_norm/$block up to $norm"
done
checkpoint=$(find ref-runs -name checkpoint.pt | head -1)
"$PY" - "$WORK/policy.pt" "$WORK/merge.pt" "$checkpoint" << 'PY' || fail "the Python modules' weights did not move"
import sys, torch
trained = dict(torch.jit.load(sys.argv[3]).named_parameters())
for block, path in (("policy", sys.argv[1]), ("merge", sys.argv[2])):
    for name, start in torch.jit.load(path).named_parameters():
        key = [k for k in trained if k.endswith(f"{block}.{name}")]
        assert len(key) == 1, f"no {block}.{name} in the checkpoint: {sorted(trained)[:8]}"
        moved = (trained[key[0]] - start).abs().max().item()
        assert moved > 0, f"{key[0]} did not move"
    print(f"every parameter of the Python {block} moved; e.g. {key[0]} by up to {moved:.3g}")
PY

# ---- kill -9 once a checkpoint is written; the same command resumes to the same bits
run kill.sqlite kill-runs "$WORK/policy.pt" > kill1.log 2>&1 &
pid=$!
shopt -s globstar nullglob
for _ in $(seq 1 2000); do  # a glob, not a find process a poll: quick on a loaded machine
  checkpoints=(kill-runs/**/checkpoint.pt)
  ((${#checkpoints[@]} > 0)) && break
  sleep 0.02
done
kill -9 $pid $(pgrep -P $pid) 2> /dev/null
wait $pid 2> /dev/null
status=$(sql kill.sqlite "SELECT status FROM runs")
# Killed before it finished: `running`, or `interrupted` where the training child saw its parent
# go (the parent's death signal) before its own SIGKILL.
[[ $status == running || $status == interrupted ]] || fail "the kill did not land in training (the run is '$status')"
run kill.sqlite kill-runs "$WORK/policy.pt" > kill2.log 2>&1 || fail "the resumed run failed: $(tail -2 kill2.log)"
grep -q 'resuming run' kill2.log || fail "the second htm run did not resume: $(head -2 kill2.log)"
[[ "$(series ref.sqlite)" == "$(series kill.sqlite)" ]] || fail "the resumed run's metrics differ from the uninterrupted run's"
echo "killed after a checkpoint and resumed: $(series kill.sqlite | wc -l) metric values equal bit for bit"

# ---- two ranks of half the batch match one process (float sums in another order: 1e-4)
run two.sqlite two-runs "$WORK/policy.pt" --nproc 2 > two.log 2>&1 || fail "--nproc 2 failed: $(tail -2 two.log)"
worst=$(sqlite3 :memory: "ATTACH 'ref.sqlite' AS a; ATTACH 'two.sqlite' AS b;
  SELECT max(abs(x.value - y.value) / max(1.0, abs(x.value))) || ' ' || count(*) FROM a.metrics x JOIN b.metrics y
  ON x.split = y.split AND x.name = y.name AND x.step = y.step WHERE x.split = 'train' AND x.name = 'loss'")
awk -v w="$worst" 'BEGIN { split(w, f, " "); exit !(f[2] >= 8 && f[1] <= 1e-4) }' ||
  fail "--nproc 2 differs from one process: largest relative difference, rows: $worst"
echo "--nproc 2 against one process: largest relative train-loss difference, steps compared: $worst"

# ---- the conformance suite with the module named on the command line
plugin=$(dirname "$HTM")/plugins/htm_policy_torchscript.so
"$HTM" check-plugin "$plugin" --param path="$WORK/policy.pt" > check.log 2>&1 ||
  fail "htm check-plugin failed: $(grep -E 'FAILED|error' check.log | head -3)"
grep -q "PASSED" check.log && echo "check-plugin: $(grep PASSED check.log)"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "python policy test passed"
