#!/usr/bin/env bash
# ctest python.results_study (the fixture of python.results and python.notebook): a tiny study
# for htm_results to read, on a small Trees set (it trains in a second and logs hierarchy
# scores beside the loss). Three variants: wide and narrow on seeds 0-1
# (a paired test), fast on seeds 0 and 2 (a Welch test), then wide and narrow confirmed on
# 1000-1001 (a second phase): ten runs. While the first batch trains, results_reader.py reads the database
# through htm_results (where python3 has pandas) and checks that a write lands while its read
# transaction is open: a reader never blocks `htm run`.
# Usage: results_study.sh HTM SOURCE_DIR WORK_DIR
set -euo pipefail
htm=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
db=$work/htm.sqlite
cat > "$work/study.toml" <<TOML
[experiment]
name = "python-results"
seeds = [0, 1]
[dataset]
plugin = "trees"
tokens = 8
train_size = 64
test_size = 16
[adapter]
plugin = "points"
[loss.point_set]
[policy]
plugin = "learned"
[model]
dim = 16
heads = 2
layers = 3
mlp_ratio = 2
[train]
epochs = 1
batch_size = 16
log_every = 1
images = 0
[runtime]
threads = 1
[variants.wide]
[variants.narrow]
model.dim = 8
model.heads = 1
[variants.fast]
train.lr = 0.003
TOML
run() { "$htm" run "$work/study.toml" --quiet --db "$db" --set "runtime.artifacts=\"$work/runs\"" "$@"; }
python=
for candidate in ${HTM_PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c 'import pandas' 2> /dev/null; then python=$candidate && break; fi
done

start=$(date +%s%N)
run --variant wide --variant narrow --jobs 2 > "$work/run1.log" 2>&1 &
writer=$!
if [ -n "$python" ]; then
  PYTHONPATH="$src/python" "$python" "$src/tests/python/results_reader.py" "$db" "$writer" || {
    wait "$writer"
    exit 1
  }
else
  echo "no python3 with pandas: the concurrent reader is not checked"
fi
wait "$writer" || { cat "$work/run1.log"; exit 1; }
run --variant fast --seed 0 --seed 2 --jobs 2 > "$work/run2.log" 2>&1 || { cat "$work/run2.log"; exit 1; }
run --confirm --variant wide --variant narrow --seed 1000 --seed 1001 --reuse-seeds --jobs 2 > "$work/run3.log" 2>&1 ||
  { cat "$work/run3.log"; exit 1; }
echo "study of 10 runs in $(( ($(date +%s%N) - start) / 1000000 )) ms: $db"
echo "results study ready"
