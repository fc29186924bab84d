#!/usr/bin/env bash
# The report in a real browser (ctest label `browser`): `htm report` of a tiny real study (two
# variants x two seeds, a few steps), rendered by headless Chromium. Checks: no script error,
# every chart drawn and none blank, the final-values table equal to `htm compare`'s numbers, a
# seed picker per variant, a screenshot that is not blank; and the bad inputs: an unknown experiment, a run with no
# metrics, a missing picture.
#   usage: browser_test.sh HTM_BINARY DATABASE EXPERIMENT
set -uo pipefail
HTM=$(realpath "$1")
DB=$(realpath "$2")
EXPERIMENT=$3
WORK=$(mktemp -d /tmp/htm-browser.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
browser() {  # chromium with what a headless root session needs
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --disable-dev-shm-usage \
    --virtual-time-budget=10000 "$@" 2> chromium.log
}
attr() { grep -o "data-$1=\"[^\"]*\"" dom.html | head -1 | cut -d'"' -f2; }

"$HTM" report "$EXPERIMENT" --db "$DB" -o report.html > report.log 2>&1 || fail "htm report: $(cat report.log)"
grep -q '<script src=\|<link ' report.html && fail "the page loads something from outside"
browser --dump-dom "file://$WORK/report.html" > dom.html
[[ $(attr ready) == yes ]] || fail "the page's script did not finish: $(grep -m3 -i 'error' chromium.log)"
errors=$(sed -n 's/.*<div id="errors">\([^<]*\)<.*/\1/p' dom.html)
[[ -z $errors ]] || fail "script errors: $errors"
grep -q 'CONSOLE.*Uncaught\|SyntaxError' chromium.log && fail "console errors: $(grep -m3 'CONSOLE' chromium.log)"
charts=$(attr charts) canvases=$(attr canvases) blank=$(attr blank)
[[ -n $charts && $charts -ge 3 && $charts == "$canvases" ]] || fail "charts drawn $charts, canvases $canvases"
[[ $blank == 0 ]] || fail "$blank chart(s) left blank"
for panel in 'data-metric="test/mse"' 'class="panel curve"' 'id="differs"' 'id="pictures"' '<img src="data:image/png;base64,'; do
  grep -q "$panel" dom.html || fail "missing from the page: $panel"
done
[[ $(grep -o 'class="seed-picker"' dom.html | wc -l) -ge 2 && $(grep -o '<option value=' dom.html | wc -l) -ge 4 ]] ||
  fail "no seed picker with each variant's two seeds"

# The final-values table holds htm compare's numbers (n, mean, sd, diff, effect) for each variant
# of the exploration phase (the first table on both).
"$HTM" compare "$EXPERIMENT" --db "$DB" > compare.txt || fail "htm compare failed"
tr '\n' ' ' < dom.html | grep -o '<table class="compare">.*</table>' | head -1 |
  sed 's/<\/tr>/\n/g; s/<[^>]*>/ /g' | awk 'NF >= 3 { $1 = $1; print }' > page.txt
checked=0
while read -r variant n rest; do
  [[ $variant == variant || -z $variant ]] && continue
  line=$(grep -m1 "^$variant " page.txt) || { fail "variant $variant not in the page's table"; continue; }
  read -r -a want <<< "$variant $n $rest"
  read -r -a have <<< "$line"
  for i in 1 2 3 4 5; do
    [[ -z ${want[$i]:-} ]] && continue
    awk -v a="${want[$i]}" -v b="${have[$i]:-x}" 'BEGIN { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a);
      exit !(b != "x" && d <= 1e-4 * (m > 1 ? m : 1)) }' || fail "$variant column $i: compare says ${want[$i]}, the page ${have[$i]:-nothing}"
  done
  checked=$((checked + 1))
done < <(sed -n '/^exploration/,/^p (/p' compare.txt | grep -v '^exploration\|^-\|^p (\|^warning')
[[ $checked -ge 2 ]] || fail "compared $checked variants with htm compare"

browser --window-size=1280,2000 --screenshot="$WORK/shot.png" "file://$WORK/report.html" > /dev/null
size=$(stat -c %s shot.png 2> /dev/null || echo 0)
[[ $size -gt 40000 ]] || fail "the screenshot is $size bytes: blank?"

# Bad input: an experiment with no runs is one clear error; a run without metrics and a
# picture whose file is gone give explicit "no data" panels, not a broken page.
"$HTM" report no-such-experiment --db "$DB" -o none.html > none.log 2>&1 && fail "a report of nothing was written"
grep -q "no runs of experiment 'no-such-experiment'" none.log || fail "unclear message: $(cat none.log)"
cp "$DB" bare.sqlite
sqlite3 bare.sqlite "DELETE FROM metrics; UPDATE artifacts SET path = path || '.gone';"
"$HTM" report "$EXPERIMENT" --db bare.sqlite -o bare.html > bare.log 2>&1 || fail "report without metrics: $(cat bare.log)"
browser --dump-dom "file://$WORK/bare.html" > dom.html
[[ $(attr ready) == yes ]] || fail "the page without metrics did not render"
grep -q 'These runs logged no metrics' dom.html || fail "no 'no metrics' panel"
grep -q 'missing file: ' dom.html || fail "no 'missing file' note"
grep -q 'class="nodata">no finished run of experiment' dom.html || fail "no 'no data' final-values panel"

if [[ $failures == 0 ]]; then echo "browser test passed ($charts charts, screenshot $size bytes)"; else exit 1; fi
