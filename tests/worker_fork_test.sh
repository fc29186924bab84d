#!/usr/bin/env bash
# A worker is a copy of its supervisor (process/worker_fork.h: libtorch loaded once) and ends on
# the same numbers as a new process: one run, and a --jobs 2 study of two seeds, under each way
# of starting workers (HTM_WORKER_SPAWN=exec: every worker a new process), every metric but the
# timings equal to 17 digits.
#   usage: worker_fork_test.sh HTM_BINARY EXPERIMENT_FILE SCRATCH_DIR
set -uo pipefail
HTM=$1 FILE=$2 DIR=$3
rm -rf "$DIR" && mkdir -p "$DIR"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
sets() { echo "--set runtime.results=$DIR/$1.sqlite --set runtime.artifacts=$DIR/$1-runs --set train.epochs=2"; }
series() {
  sqlite3 "$DIR/$1.sqlite" "SELECT r.seed, m.split, m.name, m.step, printf('%.17g', m.value) FROM metrics m
    JOIN runs r ON r.id = m.run_id WHERE m.name != 'images_per_s' ORDER BY r.seed, m.split, m.name, m.step"
}
$HTM run "$FILE" --seed 0 --verbose $(sets copy) > "$DIR/copy.log" 2>&1 || fail "the run (a copy) failed: $(tail -2 "$DIR/copy.log")"
grep -q 'is a copy of its supervisor' "$DIR/copy.log" || fail "the worker was not a copy of its supervisor"
HTM_WORKER_SPAWN=exec $HTM run "$FILE" --seed 0 --verbose $(sets new) > "$DIR/new.log" 2>&1 ||
  fail "the run (a new process) failed: $(tail -2 "$DIR/new.log")"
grep -q 'is a copy of its supervisor' "$DIR/new.log" && fail "HTM_WORKER_SPAWN=exec: the worker was a copy"
[[ -n $(series copy) && $(series copy) == "$(series new)" ]] || fail "one run: a copy's metrics differ from a new process's"
$HTM run "$FILE" --seed 1 --seed 2 --jobs 2 $(sets jobs-copy) > "$DIR/jobs-copy.log" 2>&1 || fail "--jobs 2 (copies) failed"
HTM_WORKER_SPAWN=exec $HTM run "$FILE" --seed 1 --seed 2 --jobs 2 $(sets jobs-new) > "$DIR/jobs-new.log" 2>&1 ||
  fail "--jobs 2 (new processes) failed"
[[ $(series jobs-copy | cut -d'|' -f1 | sort -u | wc -l) == 2 && $(series jobs-copy) == "$(series jobs-new)" ]] ||
  fail "--jobs 2: the copies' metrics differ from new processes'"
[[ $failures == 0 ]] && echo "worker fork test passed"
