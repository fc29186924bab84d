#!/usr/bin/env bash
# What a command costs beyond its work (docs/performance.md, "A process's start and end"): each
# round times, with every binary given in turn (alternating, so the machine's drift falls on all
# alike), `htm --help`, `htm runs` on a small database, one short run of the fault suite's study
# and that study's four runs under --jobs 2. Prints CSV rows (results/process-overhead-*.csv).
# Usage: scripts/research/process_overhead.sh ROUNDS BINARY... (each beside a plugins/ folder)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=$1
shift
work=$(mktemp -d /tmp/htm-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) $(nproc) cores"
study=tests/faults/tiny.toml
export OMP_NUM_THREADS=1 HTM_PLUGIN_PATH=
seconds() { # label binary args... : one timed command, its output kept apart
  local label=$1 bin=$2 start end
  shift 2
  start=$(date +%s.%N)
  "$bin" "$@" > "$work/out.log" 2>&1 || { echo "failed: $label with $bin (tail: $(tail -2 "$work/out.log"))" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}
first=$1
"$first" run "$study" --variant learned --seed 0 --set train.epochs=1 --quiet \
  --set runtime.results="\"$work/listed.sqlite\"" --set runtime.artifacts="\"$work/listed\"" > /dev/null 2>&1
echo "binary,revision,command,round,wall_s,cpu"
for round in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    revision=$("$bin" --version | sed -E 's/.*revision ([^)]*)\)/\1/')
    row() { echo "$bin,$revision,$1,$round,$2,$cpu"; }
    row "htm --help" "$(seconds help "$bin" --help)"
    row "htm runs" "$(seconds runs "$bin" runs --db "$work/listed.sqlite")"
    rm -rf "$work/one.sqlite" "$work/one"
    row "htm run: 1 run of 1 epoch" "$(seconds run "$bin" run "$study" --variant learned --seed 0 --set train.epochs=1 \
      --quiet --set runtime.results="\"$work/one.sqlite\"" --set runtime.artifacts="\"$work/one\"")"
    rm -rf "$work/four.sqlite" "$work/four"
    row "htm run --jobs 2: 4 runs of 1 epoch" "$(seconds jobs "$bin" run "$study" --jobs 2 --set train.epochs=1 \
      --quiet --set runtime.results="\"$work/four.sqlite\"" --set runtime.artifacts="\"$work/four\"")"
  done
done
