#!/usr/bin/env bash
# cmake/build_revision.cmake (ctest cli.build_revision): the revision a run records is the build's.
# On a scratch repository: a commit's 12-digit hash, "-dirty" once a tracked file differs,
# "unknown" outside git; the header is rewritten only when its text changes. Then the built htm
# records in a run's row what its build's header says.
set -euo pipefail
HTM=$1
SRC=$2
HEADER=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
write() { cmake -DSRC="$1" -DOUT="$work/out.h" -P "$SRC/cmake/build_revision.cmake"; }
expect() { grep -qx "#define HTM_BUILD_REVISION \"$1\"" "$work/out.h" || { echo "FAIL: wanted $1, got: $(tail -1 "$work/out.h")"; exit 1; }; }
git init -q "$work/repo"
echo a > "$work/repo/f"
git -C "$work/repo" add f
git -C "$work/repo" -c user.name=t -c user.email=t@t commit -qm one
write "$work/repo"
expect "$(git -C "$work/repo" rev-parse --short=12 HEAD)"
before=$(stat -c %Y "$work/out.h")
sleep 1
write "$work/repo"
[ "$(stat -c %Y "$work/out.h")" = "$before" ] || { echo "FAIL: rewritten without a change"; exit 1; }
echo b > "$work/repo/f"
write "$work/repo"
expect "$(git -C "$work/repo" rev-parse --short=12 HEAD)-dirty"
mkdir "$work/plain"
write "$work/plain"
expect unknown
# The built htm: a run's row holds its build's revision.
built=$(sed -nE 's/#define HTM_BUILD_REVISION "(.*)"/\1/p' "$HEADER")
[ -n "$built" ] || { echo "FAIL: no revision in $HEADER"; exit 1; }
HTM_PLUGIN_PATH= "$HTM" run "$SRC/tests/faults/tiny.toml" --variant learned --seed 0 --set train.max_steps=1 \
  --set train.eval_samples=8 --set "runtime.results=\"$work/db.sqlite\"" --set "runtime.artifacts=\"$work/runs\"" \
  > "$work/run.log" 2>&1 || { echo "FAIL: htm run: $(tail -3 "$work/run.log")"; exit 1; }
recorded=$("$HTM" query --db "$work/db.sqlite" "SELECT git_revision FROM runs" | tail -1 | tr -d ' ')
[ "$recorded" = "$built" ] || { echo "FAIL: the run recorded '$recorded', the build is '$built'"; exit 1; }
echo "build revision test passed"
