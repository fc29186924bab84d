#!/usr/bin/env bash
# `htm compare --margin` against a database written by hand (ctest cli.compare_margin): paired
# differences 0.01 0.02 0 -0.01 0.03 over seeds 1000-1004 against a mean of 0.9 give
# mean 0.01, sd 0.0158114, t(0.95, 4) = 2.1318468, bound 0.01 - 2.1318468 * 0.0158114 / sqrt(5)
# = -0.0050745 (-0.56 % of 0.9): not worse by more than 1 % (-0.009) holds, by more than 0.5 % does
# not, nor by more than 0.006 in f1's units. (Issue 39's claims were decided by this arithmetic.)
# A later finished run of a seed replaces the earlier one; an unfinished run does not count.
set -euo pipefail
HTM=$1
SRC=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/htm.sqlite
"$HTM" query --db "$db" --write "SELECT count(*) FROM runs" > /dev/null
python3 - "$db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("INSERT INTO experiments(name, created_at) VALUES ('e', 0)")
rows = [("B", s, 0.9) for s in range(1000, 1005)]
rows += [("A", 1000 + i, 0.9 + d) for i, d in enumerate([0.01, 0.02, 0.0, -0.01, 0.03])]
rows.insert(0, ("A", 1001, 0.5))               # replaced by the seed's later run
rows.append(("A", 1002, 0.1, "running"))       # not finished: does not count
for run_id, row in enumerate(rows, 1):
    variant, seed, value = row[:3]
    status = row[3] if len(row) > 3 else "finished"
    db.execute("INSERT INTO runs(id, uuid, experiment_id, variant, seed, status, started_at, ended_at, config_hash, "
               "git_revision, host, heartbeat_at) VALUES (?, ?, 1, ?, ?, ?, 0, 1, 'h', 'g', 'x', 1)",
               (run_id, f"u{run_id}", variant, seed, status))
    db.execute("INSERT INTO metrics(run_id, step, epoch, split, name, value, time) VALUES (?, 5, 0, 'test', 'f1', ?, 1)",
               (run_id, value))
db.commit()
PY
out=$("$HTM" compare e --db "$db" --metric f1 --reference B --seeds 1000-1004 --margin 'f1>=-1%')
echo "$out"
grep -qE "^A +5 .*paired t .* -0\.00507[45] vs -0\.009, p [0-9.e-]+ met$" <<< "$out"
grep -q "over the 1 margin claims of this phase" <<< "$out"
"$HTM" compare e --db "$db" --metric f1 --reference B --seeds 1000-1004 --margin 'f1>=-0.5%' | grep -qE -- "-0.00507[45] vs -0.0045, p [0-9.e-]* NOT met"
"$HTM" compare e --db "$db" --metric f1 --reference B --seeds 1000-1004 --margin 'f1>=-0.006' | grep -q -- "vs -0.006, p [0-9.e-]* met"
if "$HTM" compare e --db "$db" --reference B --seeds 2000-2009 --margin 'f1>=-1%' 2> "$work/err"; then
  echo "FAIL: no runs in the seed range accepted"; exit 1
fi
grep -q "no finished run of experiment 'e' has the metric 'test/f1' among the runs the filters select" "$work/err"
echo "compare margin test passed"
