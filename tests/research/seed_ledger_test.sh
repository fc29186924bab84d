#!/usr/bin/env bash
# The seed ledger (ctest cli.seed_ledger): htm run --confirm refuses confirmation seeds whose data
# an earlier run drew (naming the runs), runs them with --reuse-seeds (saying so), accepts fresh
# seeds and its own confirmation's runs again, and htm compare says when a confirmation was not on
# fresh data. The pairs dataset draws data from the run's seed, trees with per_run too; cli-tiny's
# (Fashion-MNIST) does not.
set -euo pipefail
HTM=$1
D=$2/tests/data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
db=$work/htm.sqlite
set_db=(--set "runtime.results=\"$db\"" --set "runtime.artifacts=\"$work/runs\"")
fail() { echo "FAIL: $*"; exit 1; }

"$HTM" run "$D/tiny_pairs.toml" "${set_db[@]}" > /dev/null 2>&1                      # run 1: seed 0, exploration
"$HTM" run "$D/tiny_pairs.toml" --confirm --variant default "${set_db[@]}" > /dev/null 2>&1 \
  || fail "fresh confirmation seed 2000 refused"                                      # run 2
"$HTM" run "$D/tiny_pairs.toml" --confirm --variant default --rerun "${set_db[@]}" > /dev/null 2>&1 \
  || fail "its own confirmation's seed refused on a second call"                     # run 3

# Another experiment on the same dataset settings confirms on seed 0, whose data run 1 drew.
cat > other.toml <<TOML
extends = "$D/tiny_pairs.toml"
[experiment]
name = "tiny-pairs-other"
seeds = [1]
confirm_seeds = [0, 3000]
TOML
if "$HTM" run other.toml --confirm --variant default "${set_db[@]}" > out 2> err; then fail "reused seed accepted"; fi
grep -q "earlier runs already drew the data of 1 confirmation seed(s)" err || { cat err; fail "no refusal line"; }
grep -q "seed 0: run 1 (tiny-pairs/default seed 0, exploration)" err || { cat err; fail "the run is not named"; }
grep -q -- "--reuse-seeds" err || fail "the way out is not named"
[ "$(sqlite3 "$db" "SELECT count(*) FROM runs")" = 3 ] || fail "a refused confirmation recorded runs"

"$HTM" run other.toml --confirm --variant default --reuse-seeds "${set_db[@]}" > out 2> err \
  || { cat err; fail "--reuse-seeds refused"; }
grep -q "warning: --reuse-seeds: this confirmation is not on fresh data" err || fail "no warning with --reuse-seeds"
"$HTM" compare tiny-pairs-other --db "$db" --metric mse > out 2>&1 || { cat out; fail "compare failed"; }
grep -q "warning: the confirmation seeds 0 of 'tiny-pairs-other' drew data that other runs drew too (run 1 (tiny-pairs/default seed 0, exploration)" out \
  || { cat out; fail "compare does not say the data were not fresh"; }
"$HTM" compare tiny-pairs --db "$db" --metric mse > out 2>&1
if grep -q "not on fresh data" out; then cat out; fail "a fresh confirmation flagged"; fi
# tiny-pairs explored seed 0, whose data tiny-pairs-other's confirmation drew afterwards.
grep -q "warning: the exploration seeds 0 of 'tiny-pairs' drew data that another experiment's confirmation drew (run 4 (tiny-pairs-other/default seed 0, confirmation)" out \
  || { cat out; fail "compare does not say the exploration met another confirmation's data"; }

# A dataset that draws the same data for every seed: its exploration's data are every seed's.
if "$HTM" run "$D/tiny_pairs.toml" --confirm --variant default --set 'dataset.run_seed=1' "${set_db[@]}" \
  > out 2> err; then fail "dataset.run_seed accepted from the command line"; fi
grep -q "dataset.run_seed is set by htm run to each run's seed" err || { cat err; fail "no line for run_seed"; }
cat > fixed.toml <<TOML
extends = "$D/tiny.toml"
[experiment]
confirm_seeds = [7]
[runtime]
results = "$db"
artifacts = "$work/runs"
TOML
"$HTM" run fixed.toml > /dev/null 2>&1
if "$HTM" run fixed.toml --confirm --variant default > out 2> err; then fail "fixed data's confirmation accepted"; fi
grep -q "draws the same data for every seed" err || { cat err; fail "fixed data not explained"; }

# trees with per_run = true: its data follow the run's seed too, so a new seed is fresh data.
cat > trees.toml <<TOML
extends = "$D/tiny_pairs.toml"
[experiment]
name = "tiny-trees"
[dataset]
plugin = "trees"
per_run = true
[runtime]
results = "$db"
artifacts = "$work/runs"
TOML
"$HTM" run trees.toml > /dev/null 2>&1 || fail "tiny trees failed"
"$HTM" run trees.toml --confirm --variant default > out 2> err || { cat err; fail "per_run trees' fresh seed refused"; }
[ "$(sqlite3 "$db" "SELECT group_concat(p.value) FROM params p JOIN runs r ON r.id = p.run_id JOIN experiments e
     ON e.id = r.experiment_id WHERE e.name = 'tiny-trees' AND p.key = 'dataset.run_seed' ORDER BY r.id")" = "0,2000" ] \
  || fail "per_run trees runs do not record dataset.run_seed"
echo "seed ledger test passed"
