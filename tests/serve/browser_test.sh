#!/usr/bin/env bash
# htm serve in a real browser (ctest label `browser`), while a study trains beside it. A copy of
# the two-variant, two-seed fixture study is served; a tiny study keeps writing into the same
# file. Headless Chromium loads, as a user would: the runs table and its filters (from the URL,
# as the form writes it), a bad filter, a running run's page twice (its curves must have grown),
# the study's live report, the sweep's parallel coordinates and variance table. No page may
# show a script error. A screenshot of each page is left in SHOTS (docs/serve.md uses them).
#   usage: browser_test.sh HTM_BINARY FIXTURE_DATABASE EXPERIMENT TINY_TOML [SHOTS]
source "$(dirname "$0")/serve_base.sh"
set -uo pipefail
HTM=$(realpath "$1")
FIXTURE=$(realpath "$2")
EXPERIMENT=$3
TINY=$(realpath "$4")
SHOTS=${5:-}
WORK=$(mktemp -d /tmp/htm-serve-browser.XXXXXX)
cleanup() {
  [[ -n ${SERVER:-} ]] && kill "$SERVER" 2> /dev/null
  [[ -n ${STUDY:-} ]] && kill "$STUDY" 2> /dev/null
  wait 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
browser() {  # chromium with what a headless root session needs
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --disable-dev-shm-usage \
    --virtual-time-budget="${BUDGET:-6000}" "$@" 2>> chromium.log
}
attr() { grep -o "data-$1=\"[^\"]*\"" dom.html | head -1 | cut -d'"' -f2; }
look() {  # look NAME URL: the page's DOM in dom.html (and NAME.html), its script errors checked
  browser --dump-dom "$BASE$2" > dom.html
  cp dom.html "$1.html"
  [[ $(attr ready) == yes ]] || fail "$1: the page's script did not finish"
  local errors
  errors=$(sed -n 's/.*<div id="errors">\([^<]*\)<.*/\1/p' dom.html)
  [[ -z $errors ]] || fail "$1: script errors: $errors"
  [[ -z ${SHOTS} ]] || browser --window-size=1280,1000 --screenshot="$SHOTS/serve-$1.png" "$BASE$2" > /dev/null
}
# sqlite3, not `htm query`: the wait below asks every 0.1 s, and each htm start loads libtorch (~0.8 s)
sql() { sqlite3 -cmd ".timeout 5000" "$WORK/htm.sqlite" "$1"; }

cp "$FIXTURE" htm.sqlite
[[ -n $SHOTS ]] && mkdir -p "$SHOTS"
# The study that trains while the browser looks: one run of the tiny model, long enough to be
# seen twice (a metric every step; 1,875 steps, killed once the looks are done).
"$HTM" run "$TINY" --set train.train_samples=30000 --set train.eval_samples=64 --set 'experiment.name="serve-live"' \
  --set "runtime.results=\"$WORK/htm.sqlite\"" --set "runtime.artifacts=\"$WORK/runs\"" > study.log 2>&1 &
STUDY=$!
"$HTM" serve --db htm.sqlite --port 0 > serve.log 2>&1 &
SERVER=$!
BASE=$(serve_base serve.log) || { echo "FAIL: htm serve did not start: $(cat serve.log)"; exit 1; }
for _ in $(seq 300); do  # until the live run has logged a few steps
  [[ $(sql "SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id JOIN experiments e ON e.id = r.experiment_id
            WHERE e.name = 'serve-live'") -gt 20 ]] 2> /dev/null && break
  sleep 0.1
done
live=$(sql "SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = 'serve-live'")
[[ -n $live ]] || fail "the live study never started: $(tail -3 study.log)"

# The runs table, then its filters as the form puts them in the URL.
all=$(sql "SELECT count(*) FROM runs")
look runs "/"
[[ $(attr total) == "$all" ]] || fail "runs: the table says $(attr total) runs, the database has $all"
grep -q 'data-status="running"' dom.html || fail "runs: the running run is not in the table"
look runs-filtered "/?experiment=$EXPERIMENT&status=finished&sort=test%2Fmse&order=asc"
want=$(sql "SELECT count(*) FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = '$EXPERIMENT'
            AND r.status = 'finished'")
[[ $(attr total) == "$want" && $(attr rows) == "$want" ]] ||
  fail "filtered: $(attr rows) rows of $(attr total), want $want"
grep -q 'data-run="'"$live"'"' dom.html && fail "filtered: the live run of another study is shown"
grep -o 'data-metric="test/mse">[^<]*' dom.html | cut -d'>' -f2 > mse.txt
sort -g mse.txt | cmp -s - mse.txt || fail "sorted by test/mse ascending, the page shows $(tr '\n' ' ' < mse.txt)"
best=$(awk 'NR == 1 { printf "%.6g", $1 * 1.001 }' mse.txt)  # the page shows 5 digits: a little above the best
look runs-metric "/?where=test%2Fmse%3C%3D$best;status%3Dfinished"
[[ $(attr rows) -ge 1 ]] || fail "test/mse<=$best: no rows"
look runs-bad "/?where=test%2Fmse%3Csmall"
grep -q 'id="bad-filter"[^>]*>[^<]*needs a number' dom.html || fail "a bad filter did not say why"
grep -q 'id="prev"[^>]*disabled' dom.html && grep -q 'id="next"[^>]*disabled' dom.html ||
  fail "a bad filter left the pager enabled"
grep -q 'id="study-list"' dom.html || fail "a bad filter emptied the list of studies"

# A running run's curves grow between two looks.
look run-first "/run/$live"
first=$(attr points)
[[ $(attr status) == running ]] || fail "run $live: status $(attr status), expected running"
sleep 3
look run-second "/run/$live"
second=$(attr points)
[[ -n $first && -n $second && $second -gt $first ]] ||
  fail "run $live: the curves did not grow ($first, then $second points)"
grep -c 'class="panel curve"' dom.html | grep -qv '^0$' || fail "run $live: no curve panels"

# The study's report, live; and the sweep.
look study "/study/$EXPERIMENT"
[[ $(attr charts) -ge 3 && $(attr blank) == 0 ]] || fail "study: charts $(attr charts), blank $(attr blank)"
grep -q 'id="live"' dom.html || fail "study: no live banner"
look study-live "/study/serve-live"
[[ $(attr renders) -ge 1 ]] || fail "the live study's page did not render"
kill "$STUDY" 2> /dev/null  # nothing after this looks at the live run: its core goes back to the suite
finished=$(sql "SELECT count(*) FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = '$EXPERIMENT'
                AND r.status = 'finished' AND NOT EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'
                AND t.value = 'confirm')")
look sweep "/sweep/$EXPERIMENT"
[[ $(attr lines) == "$finished" ]] || fail "sweep: $(attr lines) lines, $finished finished exploration runs"
[[ $(attr axes) -ge 2 ]] || fail "sweep: $(attr axes) axes"
[[ $(grep -o '<polyline' dom.html | wc -l) == "$finished" ]] || fail "sweep: polylines drawn do not match"
grep -q 'id="importance-table"' dom.html || fail "sweep: no variance table"
look sweep-bad "/sweep/$EXPERIMENT?metric=test%2Fnothing"
grep -q 'id="no-sweep"' dom.html || fail "sweep: a metric the study never logged did not say so"
grep -q '<option>test/mse</option>' dom.html || fail "sweep: after a bad metric the menu offers nothing to choose"

grep -q 'Uncaught\|SyntaxError' chromium.log && fail "console errors: $(grep -m3 'Uncaught\|SyntaxError' chromium.log)"
if [[ $failures -eq 0 ]]; then
  echo "serve browser test passed ($all runs; live run $live grew from $first to $second points)"
else
  echo "serve browser test: $failures failure(s)"
  exit 1
fi
