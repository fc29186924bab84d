#!/usr/bin/env bash
# scripts/research/paired_bound.py against a database written by hand (ctest research.paired_bound):
# paired differences 0.01 0.02 0 -0.01 0.03 over seeds 1000-1004 against a mean of 0.9 give
# mean 0.01, sd 0.0158114, t(0.95, 4) = 2.1318468, bound 0.01 - 2.1318468 * 0.0158114 / sqrt(5)
# = -0.0050747 (-0.56 % of 0.9): not worse by more than 1 % holds, by more than 0.5 % does not.
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
out=$(python3 "$SRC/scripts/research/paired_bound.py" "$db" e test/f1 A B --seeds 1000-1004 --margin 1)
echo "$out"
grep -q "n = 5" <<< "$out"
grep -q "difference +0.0100 (sd 0.0158); one-sided 95% lower bound -0.0051 (t = 2.1318, -0.56% of B)" <<< "$out"
grep -q "not worse by more than 1% (-0.0090): met" <<< "$out"
python3 "$SRC/scripts/research/paired_bound.py" "$db" e test/f1 A B --seeds 1000-1004 --margin 0.5 | grep -q ": not met"
if python3 "$SRC/scripts/research/paired_bound.py" "$db" e test/f1 A B --seeds 2000-2009 2> "$work/err"; then
  echo "FAIL: no paired seeds accepted"; exit 1
fi
grep -q "0 seed(s) of 2000-2009 have both variants finished" "$work/err"
echo "paired bound test passed"
