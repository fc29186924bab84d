#!/usr/bin/env bash
# Progress that fits a terminal: on a TTY (faked with script(1)), `htm run --jobs 2` keeps one
# live line per running job under a "jobs:" header and prints each run's final lines as it ends;
# --quiet prints no progress at all; off a TTY the line log stays.
#   usage: progress_test.sh HTM_BINARY EXPERIMENT_FILE SCRATCH_DIR
set -uo pipefail
HTM=$1 FILE=$2 DIR=$3
rm -rf "$DIR" && mkdir -p "$DIR"
sets="--set runtime.results=\"$DIR/h.sqlite\" --set runtime.artifacts=\"$DIR/runs\""
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
script -q -c "$HTM run $FILE --seed 0 --seed 1 --jobs 2 $sets" "$DIR/tty.txt" > /dev/null
grep -q 'jobs: [0-9]* done, [0-9]* running, [0-9]* left' "$DIR/tty.txt" || fail "no live jobs block on a terminal"
[[ $(grep -c 'run [0-9]* finished' "$DIR/tty.txt") == 2 ]] || fail "the two runs' final lines are missing"
ls "$DIR"/runs/*/logs/*.log > /dev/null 2>&1 || fail "no worker logs"
script -q -c "$HTM run $FILE --seed 2 --quiet $sets" "$DIR/quiet.txt" > /dev/null
grep -q ' ETA ' "$DIR/quiet.txt" && fail "--quiet printed progress"
grep -q 'run [0-9]* finished' "$DIR/quiet.txt" || fail "--quiet lost the final line"
$HTM run "$FILE" --seed 3 --verbose $sets > "$DIR/plain.txt" 2>&1
grep -q $'\r' "$DIR/plain.txt" && fail "carriage returns off a terminal"
grep -q 'evaluation at step [0-9]*: mse' "$DIR/plain.txt" || fail "--verbose printed no evaluation line"
[[ $failures == 0 ]] && echo "progress test passed"
