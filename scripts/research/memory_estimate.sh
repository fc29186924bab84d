#!/usr/bin/env bash
# The training-memory estimate against the measured peak (docs/reliability.md, "Memory before the
# first step"): each configuration runs once, seed 0, in a scratch database, and its `memory:` line
# gives both figures. Prints CSV rows (results/memory-estimate-*.csv).
# Usage: scripts/research/memory_estimate.sh [HTM_BINARY] [SCRATCH_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
htm=${1:-build/htm}
work=${2:-$(mktemp -d /tmp/htm-memory.XXXXXX)}
mkdir -p "$work"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) $(nproc) cores"
configs=(
  "tests/faults/tiny.toml --variant learned"
  "experiments/quickstart.toml --set train.max_steps=30"
  "experiments/paper/policy.toml --variant learned --set train.max_steps=30"
  "experiments/htm/policy_trees32.toml --variant rloo_dense --set train.max_steps=30"
  "experiments/quickstart.toml --set train.max_steps=10 --set model.dim=256 --set train.batch_size=256"
  "experiments/bench/paper_size.toml --set train.max_steps=3"
  "experiments/bench/paper_size.toml --set train.max_steps=2 --set train.batch_size=32"
)
echo "run_uuid,experiment,variant,seed,command_settings,estimate_mib,peak_mib,estimate_vs_peak_pct,cpu"
i=0
for c in "${configs[@]}"; do
  i=$((i + 1))
  db="$work/m$i.sqlite"
  # shellcheck disable=SC2086  # the configuration's words are arguments
  "$htm" run $c --seed 0 --rerun --ignore-memory --set runtime.results="\"$db\"" \
    --set runtime.artifacts="\"$work/runs$i\"" > "$work/m$i.log" 2>&1 || { echo "failed: $c (log $work/m$i.log)" >&2; continue; }
  line=$(grep -m1 '] memory: peak' "$work/m$i.log")
  peak=$(sed -E 's/.*peak ([0-9]+) MiB.*/\1/' <<< "$line")
  estimate=$(sed -E 's/.*estimated ([0-9]+) MiB.*/\1/' <<< "$line")
  row=$(sqlite3 -csv "$db" "SELECT r.uuid, e.name, r.variant, r.seed FROM runs r JOIN experiments e ON e.id = r.experiment_id ORDER BY r.id DESC LIMIT 1")
  pct=$(awk -v e="$estimate" -v p="$peak" 'BEGIN{printf "%+.0f", 100 * (e - p) / p}')
  echo "$row,$c,$estimate,$peak,$pct,$cpu"
done
