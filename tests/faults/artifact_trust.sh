#!/usr/bin/env bash
# Files only from where runs wrote them (ctest faults.trust; docs/reliability.md, "Artifact
# folders"). One real run makes a folder here; a "foreign" database, a copy whose rows name
# folders and files outside it (/etc, a relative path with .., a link out, an artifacts row
# naming an outside file, an interrupted run elsewhere), is merged in with htm merge. Then not
# one byte of an outside file may come back from htm serve (every route, percent-encoded
# spellings, with the token), htm report, htm sample or htm export; htm resume and htm run must
# refuse to resume the foreign run and write nothing there; the local run's pictures still show.
#   usage: artifact_trust.sh HTM_BINARY SOURCE_DIR
source "$(dirname "$0")/../serve/serve_base.sh"
set -uo pipefail
HTM=$(realpath "$1")
SRC=$(realpath "$2")
WORK=$(mktemp -d /tmp/htm-trust.XXXXXX)
cleanup() {
  [[ -n ${SERVER:-} ]] && kill "$SERVER" 2> /dev/null
  wait 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
STUDY=$SRC/tests/faults/tiny.toml
failures=0 refusals=0 leaked=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
id_of() { sqlite3 local.sqlite "SELECT id FROM runs WHERE uuid = '$1'"; }

# ---- outside every root: a secret, a "picture" holding it, and a folder a foreign run resumes in
SECRET="htm-trust-secret-$RANDOM$RANDOM"
mkdir -p outside/resume
echo "$SECRET" > outside/secret.txt
cp outside/secret.txt outside/secret.png
echo "$SECRET" > outside/resume/checkpoint.pt
SECRET64=$(base64 -w0 outside/secret.png)
PASSWD=$(head -c 12 /etc/passwd)  # root:x:0:0:r
leaks() { # FILE: how many of its lines hold an outside file's content
  local n
  n=$(grep -cF -e "$SECRET" -e "$SECRET64" -e "$PASSWD" "$1" 2> /dev/null)
  echo "${n:-0}"
}
outside_state() { find outside -printf '%p %s %T@\n' | sort; }

# ---- the local run: htm run marks its root; its folder is served
"$HTM" run "$STUDY" --variant random --seed 0 --set train.epochs=1 --set "runtime.results=\"$WORK/local.sqlite\"" \
  --set "runtime.artifacts=\"$WORK/runs\"" > run.log 2>&1 || { echo "FAIL: the local run: $(tail -3 run.log)"; exit 1; }
[[ -f runs/.htm-artifacts && ! -L runs/.htm-artifacts ]] || fail "htm run left no marker in runs/"
LOCAL=$(sqlite3 local.sqlite "SELECT id FROM runs")
LOCAL_DIR=$(sqlite3 local.sqlite "SELECT artifact_dir FROM runs")
ln -s "$WORK/outside/secret.png" "$LOCAL_DIR/out.png"  # a link out, inside a trusted folder
ln -s "$WORK/outside" runs/faults/link                 # a link in the marked root to a folder outside

# ---- the foreign database: the local one copied, its rows pointed outside
cp local.sqlite foreign.sqlite
sqlite3 foreign.sqlite << SQL || fail "could not build the foreign database"
UPDATE runs SET uuid = 'foreign-a', artifact_dir = '/etc', host = 'elsewhere';
INSERT INTO artifacts(run_id, kind, path, step, created_at) VALUES
  (1, 'passwd', '/etc/passwd', 999, 0), (1, 'secret', '$WORK/outside/secret.png', 999, 0);
CREATE TEMP TABLE copies(uuid TEXT, dir TEXT, seed INTEGER, status TEXT, picture TEXT);
INSERT INTO copies VALUES
  ('foreign-b', 'runs/faults/../../outside', 0, 'finished', 'runs/faults/../../outside/secret.png'),
  ('foreign-c', 'runs/faults/link', 0, 'finished', 'runs/faults/link/secret.png'),
  ('foreign-d', '$LOCAL_DIR', 0, 'finished', '$WORK/outside/secret.png'),
  ('foreign-e', '$WORK/outside/resume', 1, 'interrupted', '$WORK/outside/secret.png');
INSERT INTO runs(uuid, experiment_id, variant, seed, status, started_at, ended_at, source_file, config_toml,
                 config_hash, git_revision, torch_version, htm_version, host, artifact_dir, error)
  SELECT c.uuid, r.experiment_id, r.variant, c.seed, c.status, r.started_at, r.ended_at, r.source_file, r.config_toml,
         r.config_hash, r.git_revision, r.torch_version, r.htm_version, r.host, c.dir, NULL
  FROM copies c, runs r WHERE r.uuid = 'foreign-a';
INSERT INTO artifacts(run_id, kind, path, step, created_at)
  SELECT r.id, 'reconstructions', c.picture, 999, 0 FROM copies c JOIN runs r ON r.uuid = c.uuid;
INSERT INTO artifacts(run_id, kind, path, step, created_at)
  SELECT r.id, 'policy', '$LOCAL_DIR/../../../outside/secret.png', 999, 0 FROM runs r WHERE r.uuid = 'foreign-d';
SQL
"$HTM" merge foreign.sqlite --db local.sqlite > merge.log 2>&1 || fail "htm merge: $(tail -2 merge.log)"
A=$(id_of foreign-a) B=$(id_of foreign-b) C=$(id_of foreign-c) D=$(id_of foreign-d) E=$(id_of foreign-e)
[[ -n $A && -n $B && -n $C && -n $D && -n $E ]] || fail "the merge did not bring the foreign runs: $(cat merge.log)"
[[ $(sqlite3 local.sqlite "SELECT artifact_dir FROM runs WHERE id = $A") == /etc ]] || fail "merge rewrote a path"
before=$(outside_state)

# ---- htm serve, with a token: nothing outside over any route
TOKEN=trust-$RANDOM$RANDOM
"$HTM" serve --db local.sqlite --port 0 --token "$TOKEN" > serve.log 2>&1 &
SERVER=$!
BASE=$(serve_base serve.log) || { echo "FAIL: htm serve did not start: $(cat serve.log)"; exit 1; }
get() { # PATH: its status in CODE, its body in body.out, any outside bytes in it counted
  CODE=$(curl -s --path-as-is -o body.out -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$BASE$1")
  if (($(leaks body.out) > 0)); then
    leaked=$((leaked + $(stat -c %s body.out)))
    fail "serve $1 gave outside bytes (HTTP $CODE)"
  fi
}
[[ $(curl -s -o /dev/null -w '%{http_code}' "$BASE/artifact/$A/passwd") == 401 ]] || fail "no token, not refused"
for run in $A $B $C $D $E; do
  for path in passwd secret.png secret.txt checkpoint.pt resume/checkpoint.pt ..%2Fsecret.png %2e%2e/secret.png \
    %2e%2e%2fsecret.txt %2Fetc%2Fpasswd /etc/passwd ../../../../../../etc/passwd out.png; do
    get "/artifact/$run/$path"
    [[ $CODE == 200 && $run != "$D" ]] && fail "serve /artifact/$run/$path: 200 from a foreign folder"
    [[ $CODE != 200 ]] && refusals=$((refusals + 1))
  done
  get "/artifact/$run/secret.png"
  [[ $CODE == 403 || $run == "$D" ]] || fail "run $run's folder outside: HTTP $CODE, not 403"
  get "/api/run/$run"
  grep -q '"artifacts_refused":"run '"$run""'s artifact folder" body.out || [[ $run == "$D" ]] ||
    fail "/api/run/$run does not say why its pictures are not served"
done
for path in ..%2F..%2F..%2Foutside%2Fsecret.txt %2e%2e/%2e%2e/%2e%2e/outside/secret.txt out.png \
  ..%2f..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd link/secret.txt; do
  get "/artifact/$LOCAL/$path"
  [[ $CODE != 200 ]] && refusals=$((refusals + 1)) || fail "serve /artifact/$LOCAL/$path: 200"
done
for path in /study/faults /api/study/faults /api/study/faults/curves "/run/$A" /api/runs; do get "$path"; done
# The local run's pictures are still listed and served.
get "/api/run/$LOCAL"
picture=$(grep -o '"file":"[^"]*\.png"' body.out | grep -v out.png | head -1 | cut -d'"' -f4)
[[ -n $picture ]] || fail "the local run lists no picture: $(head -c 300 body.out)"
get "/artifact/$LOCAL/$picture"
[[ $CODE == 200 && $(head -c 4 body.out | tail -c 3) == PNG ]] || fail "the local run's picture $picture: HTTP $CODE"
get /api/study/faults
grep -q "\"src\":\"/artifact/$LOCAL/" body.out || fail "the study page links none of the local run's pictures"

# ---- htm report: the local pictures inlined, nothing outside; --artifacts trusts a folder
"$HTM" report faults --db local.sqlite -o report.html > report.log 2>&1 || fail "htm report: $(tail -2 report.log)"
n=$(leaks report.html)
((n > 0)) && { leaked=$((leaked + n)); fail "htm report embedded an outside file"; }
grep -q 'data:image/png;base64,iVBOR' report.html || fail "htm report inlined none of the local run's pictures"
grep -q "not under a folder htm run wrote on this machine" report.html || fail "htm report does not say why"
"$HTM" report faults --db local.sqlite -o trusted.html --artifacts outside > report.log 2>&1 ||
  fail "htm report --artifacts: $(tail -2 report.log)"
grep -qF "$SECRET64" trusted.html || fail "htm report --artifacts outside did not read the folder it was given"

# ---- htm sample and htm export of a foreign run: one line, exit 1, nothing written
one_refusal() { # NAME LOG RC
  if [[ $3 == 1 && $(wc -l < "$2") == 1 ]] && grep -q '^error: run .* is not under a folder htm run wrote' "$2"; then
    refusals=$((refusals + 1))
  else
    fail "$1 of a foreign run: rc $3, $(head -c 400 "$2")"
  fi
}
"$HTM" sample "$A" --db local.sqlite -n 2 > sample.log 2>&1
one_refusal "htm sample" sample.log $?
"$HTM" sample "$B" --db local.sqlite -n 2 -o "$WORK/samples.png" > sample.log 2>&1
one_refusal "htm sample -o" sample.log $?
[[ ! -e samples.png ]] || fail "htm sample wrote a picture for a foreign run"
"$HTM" export "$C" --db local.sqlite --format weights -o "$WORK/w.pt" > export.log 2>&1
one_refusal "htm export --format weights" export.log $?
[[ ! -e w.pt ]] || fail "htm export wrote weights of a foreign run"
"$HTM" export "$LOCAL" --db local.sqlite --format weights -o "$WORK/local.pt" > export.log 2>&1 ||
  fail "htm export of the local run: $(tail -2 export.log)"

# ---- resuming the foreign interrupted run: refused by htm resume and by htm run, nothing written there
"$HTM" resume "$E" --db local.sqlite --set train.epochs=1 > resume.log 2>&1
rc=$?
if [[ $rc == 1 ]] && grep -q "run $E is not resumed: run $E's artifact folder" resume.log; then
  refusals=$((refusals + 1))
else
  fail "htm resume of a foreign run: rc $rc, $(tail -3 resume.log)"
fi
"$HTM" run "$STUDY" --variant random --seed 1 --set train.epochs=1 --set "runtime.results=\"$WORK/local.sqlite\"" \
  --set "runtime.artifacts=\"$WORK/runs\"" > rerun.log 2>&1
rc=$?
if [[ $rc == 1 ]] && grep -q "run $E is not resumed: run $E's artifact folder" rerun.log; then
  refusals=$((refusals + 1))
else
  fail "htm run resuming a foreign run: rc $rc, $(tail -3 rerun.log)"
fi
[[ $(sqlite3 local.sqlite "SELECT status || ' ' || resumes FROM runs WHERE id = $E") == "interrupted 0" ]] ||
  fail "the refused run's row changed: $(sqlite3 local.sqlite "SELECT status, resumes FROM runs WHERE id = $E")"
[[ "$(outside_state)" == "$before" ]] || fail "written outside: $(diff <(echo "$before") <(outside_state))"

if [[ $failures == 0 ]]; then
  echo "artifact trust passed: $refusals refusals, $leaked bytes outside"
else
  echo "artifact trust: $failures failure(s), $leaked bytes outside"
  exit 1
fi
