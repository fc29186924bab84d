#!/usr/bin/env bash
# scripts/slurm/sweep.sh on a real Slurm cluster: starts a single-node one of its own in a temp
# dir (tests/slurm/start_cluster.sh: munged, slurmctld, slurmd as the current user), sweeps a tiny
# study (2 variants × 2 seeds) over 2 shards, waits for the array and merge jobs, then checks the
# merged database holds every (variant, seed) exactly once, finished, and that merging the shards
# again adds nothing. Fails (never skips) when Slurm or munge is missing.
#
#   tests/slurm/slurm_test.sh HTM_BINARY REPO_ROOT
#
# Writes only to temp dirs; REPO_ROOT is read. Takes about 10 s (2 s to start the cluster).
set -euo pipefail

(($# == 2)) || { echo "usage: $0 HTM_BINARY REPO_ROOT" >&2; exit 2; }
[[ -x $1 && -f $2/scripts/slurm/sweep.sh ]] || { echo "slurm test: bad arguments: $*" >&2; exit 2; }
htm=$(realpath "$1") repo=$(realpath "$2")
command -v sqlite3 >/dev/null || { echo "slurm test: sqlite3 not found" >&2; exit 1; }
shards=2 timeout_s=240 t0=$SECONDS

source "$repo/tests/slurm/start_cluster.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/htm-slurm-test.XXXXXX")

# On failure: the cluster's logs and the jobs' logs; always: stop the cluster, remove the dirs.
cleanup() {
  local rc=$?
  set +e
  if ((rc != 0)); then
    echo "slurm test FAILED (exit $rc); logs follow" >&2
    if [[ -n ${SLURM_CLUSTER_DIR:-} && -z ${SLURM_CLUSTER_FAILED:-} ]]; then
      squeue --states=all -o '%i %j %T %r' >&2 2>/dev/null || true
      slurm_cluster_logs >&2
    fi
    local f
    for f in "$work"/results/shards/*/*.log; do
      [[ -f $f ]] && { echo "----- $f" >&2; tail -n 40 "$f" >&2; }
    done
  fi
  slurm_cluster_stop
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "slurm test: $*" >&2; exit 1; }

slurm_cluster_start || fail "the test cluster did not start"
echo "slurm test: cluster up in $((SECONDS - t0)) s ($SLURM_CONF)"

# The study: tests/faults/tiny.toml cut down to seconds per run.
cat >"$work/tiny.toml" <<EOF
[experiment]
name = "slurm"
seeds = [0, 1]

[dataset]
plugin = "trees"
tokens = 16
train_size = 64
test_size = 16

[adapter]
plugin = "points"

[model]
dim = 16
heads = 2
merge_fraction = 1.0
layers = 2

[train]
epochs = 1
train_samples = 64
batch_size = 16
eval_samples = 16
images = 2
log_every = 1

[loss.point_set]

[runtime]
threads = 1
artifacts = "$work/artifacts"

[variants.learned]
policy.plugin = "learned"
[variants.random]
policy.plugin = "random"
EOF
expected=$'learned|0|finished\nlearned|1|finished\nrandom|0|finished\nrandom|1|finished'

cd "$work"
out=$("$repo/scripts/slurm/sweep.sh" tiny.toml --shards "$shards" --db merged.sqlite --htm "$htm" \
  -- --time=10) || fail "sweep.sh failed: $out"
echo "$out"
read -r array merge < <(sed -n 's/^submitted array job \([0-9]*\) .* merge job \([0-9]*\)$/\1 \2/p' <<<"$out")
[[ -n ${merge:-} ]] || fail "no job ids in sweep.sh's output"
shard_dir=$(echo "$work"/results/shards/tiny-*)
[[ -d $shard_dir ]] || fail "no shard dir under $work/results/shards"

# squeue lists a job until it ends; afterwards --states=all still shows how it ended.
while [[ -n $(squeue -h -j "$array,$merge" -o %i 2>/dev/null) ]]; do
  ((SECONDS - t0 < timeout_s)) || fail "jobs $array, $merge not done after $timeout_s s"
  sleep 1
done
states=$(squeue -h --states=all -j "$array,$merge" -o '%i %T')
echo "$states"
[[ $(grep -c ' COMPLETED$' <<<"$states") == $((shards + 1)) ]] ||
  fail "not every job completed (expected $shards array tasks and the merge)"

# Each shard trained some runs, together each run once; the merge got them all.
total=0
for ((k = 0; k < shards; k++)); do
  n=$(sqlite3 "$shard_dir/shard-$k.sqlite" "SELECT count(*) FROM runs")
  ((n > 0)) || fail "shard $k trained no runs"
  total=$((total + n))
done
((total == 4)) || fail "the shards hold $total runs, not 4 (a run trained twice or missing)"
cat "$shard_dir/merge.log"
got=$(sqlite3 merged.sqlite "SELECT variant, seed, status FROM runs ORDER BY variant, seed")
[[ $got == "$expected" ]] || fail "merged runs are"$'\n'"$got"$'\n'"expected"$'\n'"$expected"

# Merging again copies nothing: runs are keyed by uuid.
again=$("$htm" merge "$shard_dir"/shard-*.sqlite --db merged.sqlite)
echo "$again"
[[ $(grep -c ': 0 new runs merged' <<<"$again") == "$shards" ]] || fail "the second merge added runs"

# Data-parallel under srun: two tasks of one job are ranks 0 and 1 of one run (scripts/slurm/ranks.sh
# turns srun's variables into torchrun's); rank 0 alone records it.
dp=$(sbatch --parsable --ntasks=2 --cpus-per-task=1 --time=10 -o "$work/dp.log" \
  --wrap "srun '$repo/scripts/slurm/ranks.sh' '$htm' run tiny.toml --variant learned --seed 0 --db dp.sqlite --quiet")
while [[ -n $(squeue -h -j "$dp" -o %i 2>/dev/null) ]]; do
  ((SECONDS - t0 < timeout_s)) || fail "data-parallel job $dp not done after $timeout_s s"
  sleep 1
done
cat "$work/dp.log"
dp_runs=$(sqlite3 dp.sqlite "SELECT variant, seed, status FROM runs")
[[ $dp_runs == "learned|0|finished" ]] || fail "the srun data-parallel job recorded '$dp_runs', not one finished run"
[[ $(sqlite3 merged.sqlite "SELECT printf('%.6f', value) FROM latest_metrics m JOIN runs r ON r.id = m.run_id
      WHERE r.variant = 'learned' AND r.seed = 0 AND m.split = 'test' AND m.name = 'mse'") == \
   $(sqlite3 dp.sqlite "SELECT printf('%.6f', value) FROM latest_metrics WHERE split = 'test' AND name = 'mse'") ]] ||
  fail "2 srun ranks did not reach the single process's test MSE"

echo "slurm test passed: 4 runs (2 variants × 2 seeds) over $shards shards (array job $array," \
  "merge job $merge), merged once, merge again added 0; one run on 2 srun ranks (job $dp) equal to" \
  "its single-process run; in $((SECONDS - t0)) s"
