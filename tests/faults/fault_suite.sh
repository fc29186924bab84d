#!/usr/bin/env bash
# The fault-injection suite (ctest label `faults`): kills, signals, concurrent runs, a full
# disk, damaged plugins and bad input against a real `htm`. Each section asserts what
# docs/reliability.md promises; the last lines print the figures that page quotes.
#   usage: fault_suite.sh HTM_BINARY SOURCE_DIR [SECTION...]   (sections: all by default)
set -uo pipefail
HTM=$(realpath "$1")
SRC=$(realpath "$2")
shift 2
SECTIONS=${*:-kill signals concurrent jobs crash corrupt disk input plugins files lock watchdog stop}
WORK=$(mktemp -d /tmp/htm-faults.XXXXXX)
# The lock, stop and watchdog sections mostly wait (35 s on an outside lock; 3 s graces and stall
# timeouts): each runs beside the others, in a scratch folder of its own (not under $WORK, which
# the leftovers check greps for).
BESIDE="lock stop watchdog"
declare -A BESIDE_WORK=()
trap 'rm -rf "$WORK" "${BESIDE_WORK[@]}"' EXIT
cd "$WORK"
export TMPDIR=$WORK/tmp  # each section's own: the leftovers check counts the run boards left there
mkdir -p "$TMPDIR"
STUDY=$SRC/tests/faults/tiny.toml
export OMP_NUM_THREADS=1
failures=0 injected=0 resumed=0 crashes=0 lost=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { [[ $failures == "$section_start" ]] && echo "$*" || echo "${1%%:*}: FAILED"; }  # a section's verdict
section_start=0
# A crash is an abort or a signal death other than the ones we sent: SIGABRT 134, SIGBUS 135,
# SIGFPE 136, SIGSEGV 139; or glibc's heap-corruption words in the output.
crashed() { # rc logfile
  [[ $1 == 134 || $1 == 135 || $1 == 136 || $1 == 139 ]] && return 0
  grep -qE 'corrupted|double free|free\(\)|terminate called|Segmentation|Aborted' "$2"
}
sql() { sqlite3 "$1" "$2"; }
run_args() { # db artifacts
  echo "--set runtime.results=\"$1\" --set runtime.artifacts=\"$2\""
}
# Every metric of one run but the timing, as text: two runs compare equal when their lines do.
series() { # db run_id
  sql "$1" "SELECT split, name, step, printf('%.17g', value) FROM metrics WHERE run_id = $2
            AND name != 'images_per_s' ORDER BY split, name, step"
}
random_delay() { # lo hi (seconds, decimals)
  awk -v lo="$1" -v hi="$2" -v seed="$RANDOM" 'BEGIN { srand(seed); printf "%.2f", lo + rand() * (hi - lo) }'
}

# ---- the reference: one uninterrupted run (20 epochs, 640 steps: kills land in training)
ref() {
  if [[ ! -f ref.sqlite ]]; then
    "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=20 $(run_args "$WORK/ref.sqlite" "$WORK/ref-runs") > ref.log 2>&1 ||
      fail "the reference run failed: $(tail -2 ref.log)"
  fi
}

section_kill() {  # kill -9 at random points, then the same command resumes; the result is the reference's
  # (kill -9 of the training child alone is a crash: section_crash)
  ref
  local db=$WORK/kill.sqlite rc kills=0
  for i in 1 2 3 4 5; do
    "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=20 $(run_args "$db" "$WORK/kill-runs") > kill$i.log 2>&1 &
    local pid=$!
    sleep "$(random_delay 0.8 2.5)"
    # The whole process tree at once, as a lost machine: htm run and the child training the run.
    kill -9 $pid $(pgrep -P $pid) 2>/dev/null
    wait $pid 2>/dev/null; rc=$?
    [[ $rc == 137 ]] && { injected=$((injected + 1)); kills=$((kills + 1)); }
    if (( kills == 1 )) && [[ $rc == 137 && $(sql "$db" "SELECT status FROM runs") == running ]]; then
      # The dead run shows as such, and --clean records it.
      "$HTM" runs --db "$db" > runs.log 2>&1
      grep -q 'killed\*' runs.log || fail "kill: htm runs does not show the dead run as killed*: $(tail -3 runs.log)"
      "$HTM" runs --db "$db" --clean > runs.log 2>&1
      grep -q '^1 run(s) whose process was gone recorded as killed' runs.log || fail "kill: htm runs --clean: $(head -2 runs.log)"
      [[ $(sql "$db" "SELECT status FROM runs") == killed ]] || fail "kill: --clean did not record the run killed"
    fi
    crashed $rc kill$i.log && { crashes=$((crashes + 1)); fail "kill -9 round $i: crash (rc $rc)"; }
    grep -q 'resuming run' kill$i.log && resumed=$((resumed + 1))
  done
  "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=20 $(run_args "$db" "$WORK/kill-runs") > kill-final.log 2>&1 ||
    fail "after the kills the run did not finish: $(tail -2 kill-final.log)"
  grep -q 'resuming run' kill-final.log && resumed=$((resumed + 1))
  [[ $(sql "$db" "SELECT count(*) || ' ' || group_concat(status) FROM runs") == "1 finished" ]] ||
    fail "kill: expected one finished run, got $(sql "$db" "SELECT group_concat(status) FROM runs")"
  if [[ "$(series "$WORK/ref.sqlite" 1)" != "$(series "$db" 1)" ]]; then
    fail "kill: the resumed run's metrics differ from the uninterrupted run's"
    lost=$((lost + 1))
  fi
  [[ $(sql "$db" "PRAGMA integrity_check") == ok ]] || fail "kill: integrity_check"
  local twice
  twice=$(sql "$db" "SELECT count(*) FROM (SELECT 1 FROM metrics GROUP BY run_id, split, name, step HAVING count(*) > 1)")
  [[ $twice == 0 ]] || fail "kill: $twice metrics logged twice"
  (( kills >= 3 )) || fail "kill: only $kills of 5 kills landed before the run finished"
  ok "kill: $kills kill -9 during training, run finished with the reference's metrics bit for bit"
}

section_signals() {  # SIGINT/SIGTERM x 10 at random points of 4 runs (320 steps each): never an abort; each resumes
  local db=$WORK/sig.sqlite rc aborts=0 landed=0
  for i in $(seq 1 10); do
    local sig=INT
    (( i % 2 == 0 )) && sig=TERM
    "$HTM" run "$STUDY" --variant learned --seed $((i % 4)) --set train.epochs=10 \
      $(run_args "$db" "$WORK/sig-runs") > sig$i.log 2>&1 &
    local pid=$!
    sleep "$(random_delay 0.3 2.5)"
    kill -$sig $pid 2>/dev/null
    wait $pid; rc=$?
    [[ $rc == 130 || $rc == 143 ]] && { injected=$((injected + 1)); landed=$((landed + 1)); }
    grep -q 'resuming run' sig$i.log && resumed=$((resumed + 1))
    if crashed $rc sig$i.log; then
      aborts=$((aborts + 1)); crashes=$((crashes + 1)); fail "SIG$sig round $i: crash (rc $rc): $(tail -2 sig$i.log)"
    elif [[ $rc != 0 && $rc != 130 && $rc != 143 ]]; then
      fail "SIG$sig round $i: exit $rc: $(tail -2 sig$i.log)"
    fi
  done
  local running
  running=$(sql "$db" "SELECT count(*) FROM runs WHERE status = 'running'")
  [[ $running == 0 ]] || fail "signals: $running run(s) left 'running' after a handled signal"
  "$HTM" run "$STUDY" --variant learned --seed 0 --seed 1 --seed 2 --seed 3 --set train.epochs=10 \
    $(run_args "$db" "$WORK/sig-runs") > sig-final.log 2>&1 || fail "signals: the runs did not finish afterwards"
  resumed=$((resumed + $(grep -c 'resuming run' sig-final.log)))
  [[ $(sql "$db" "SELECT count(*) || ' ' || sum(status = 'finished') FROM runs") == "4 4" ]] ||
    fail "signals: expected 4 finished runs, got $(sql "$db" "SELECT group_concat(seed || status) FROM runs")"
  [[ $(sql "$db" "PRAGMA integrity_check") == ok ]] || fail "signals: integrity_check"
  ok "signals: 10 SIGINT/SIGTERM ($landed before the run ended), $aborts aborts"
}

section_concurrent() {  # two `htm run` of one study at once split the work
  local db=$WORK/two.sqlite
  "$HTM" run "$STUDY" $(run_args "$db" "$WORK/two-runs") > two-a.log 2>&1 &
  local a=$!
  "$HTM" run "$STUDY" --variant learned --variant learned --seed 0 --seed 0 --seed 1 --variant random \
    $(run_args "$db" "$WORK/two-runs") > two-b.log 2>&1 &
  local b=$!
  wait $a || fail "concurrent: first process failed: $(tail -2 two-a.log)"
  wait $b || fail "concurrent: second process failed: $(tail -2 two-b.log)"
  [[ $(sql "$db" "SELECT count(*) FROM runs") == 4 ]] ||
    fail "concurrent: expected 4 runs, got $(sql "$db" "SELECT group_concat(variant || seed || status) FROM runs")"
  [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'finished'") == 4 ]] || fail "concurrent: not all finished"
  [[ $(sql "$db" "SELECT count(*) FROM (SELECT 1 FROM runs GROUP BY variant, seed HAVING count(*) > 1)") == 0 ]] ||
    fail "concurrent: a run was trained twice"
  cat two-a.log two-b.log | grep -c 'being trained by another process\|already finished' > /dev/null ||
    fail "concurrent: neither process skipped anything"
  ok "concurrent: 2 processes, 4 runs, none trained twice"
}

section_jobs() {  # --jobs: a signal to the parent reaches the workers; a killed parent takes them along
  local db=$WORK/jobs.sqlite rc
  "$HTM" run "$STUDY" --jobs 2 $(run_args "$db" "$WORK/jobs-runs") > jobs.log 2>&1 &
  local pid=$! tries=0
  # The signal must land while workers train: wait (up to 60 s) until one has claimed its run, so
  # a slow start on a busy machine does not turn this into a test of start-up.
  until [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'running'" 2> /dev/null) -ge 1 ]] || ((tries >= 600)); do
    sleep 0.1
    tries=$((tries + 1))
  done
  sleep 0.5
  kill -TERM $pid; injected=$((injected + 1))
  wait $pid; rc=$?
  [[ $rc == 130 ]] || fail "jobs: parent exit $rc after SIGTERM, expected 130: $(tail -3 jobs.log)"
  grep -q 'not started' jobs.log || fail "jobs: the runs never started were not listed"
  [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'running'") == 0 ]] || fail "jobs: a worker's run left running"
  [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'interrupted'") -ge 1 ]] || fail "jobs: no worker recorded interrupted"
  "$HTM" run "$STUDY" --jobs 2 $(run_args "$db" "$WORK/jobs-runs") > jobs2.log 2>&1 &
  pid=$!
  sleep 2.5
  kill -9 $pid; injected=$((injected + 1))
  wait $pid
  # The workers go when they see their parent gone; one still starting (libtorch's load takes a
  # few seconds on a busy machine) sees it once started. 15 s is the bound.
  for _ in $(seq 1 75); do pgrep -f "jobs-runs" > /dev/null || break; sleep 0.2; done
  if pgrep -f "jobs-runs" > /dev/null; then
    fail "jobs: workers outlived their killed parent by 15 s"
    pkill -9 -f "jobs-runs"
  fi
  "$HTM" run "$STUDY" --jobs 2 $(run_args "$db" "$WORK/jobs-runs") > jobs3.log 2>&1 || fail "jobs: the study did not finish"
  resumed=$((resumed + $(grep -c 'resuming run' jobs3.log)))
  [[ $(sql "$db" "SELECT count(*) || ' ' || sum(status = 'finished') FROM runs") == "4 4" ]] ||
    fail "jobs: expected 4 finished runs, got $(sql "$db" "SELECT group_concat(variant || seed || status) FROM runs")"
  ok "jobs: SIGTERM forwarded, orphans none, study finished"
}

section_crash() {  # a plugin that crashes its process costs that run: recorded failed, named, the study goes on
  local db=$WORK/crash.sqlite rc kinds=0 fault id error
  local crash=$SRC/tests/faults/crash.toml
  export HTM_PLUGIN_PATH=$(dirname "$HTM")/test-plugins
  declare -A want=([segv]=SIGSEGV [abort]=SIGABRT [fpe]=SIGFPE [bus]=SIGBUS [ill]=SIGILL [kill]=SIGKILL
                   [exit]='exited with code 3')
  for fault in segv abort fpe bus ill kill exit; do  # one run each, in a supervised child (--jobs 1)
    db=$WORK/crash-$fault.sqlite
    "$HTM" run "$crash" --variant crashy --seed 0 --set "policy.fault=\"$fault\"" \
      $(run_args "$db" "$WORK/crash-runs") > crash-$fault.log 2>&1
    rc=$?
    injected=$((injected + 1))
    [[ $rc == 1 ]] || fail "crash $fault: exit $rc, expected 1: $(tail -2 crash-$fault.log)"
    id=$(sql "$db" "SELECT max(id) FROM runs")
    error=$(sql "$db" "SELECT status || ': ' || error FROM runs WHERE id = $id")
    [[ $error == "failed: "*"${want[$fault]}"*"policy plugin 'faulty' 0.9.1 ("*"htm_policy_faulty.so) at step "* ]] ||
      fail "crash $fault: run $id recorded as '$error'"
    tail -1 crash-$fault.log | grep -q "^htm: 1 of 1 runs failed (run $id)" ||
      fail "crash $fault: last line: $(tail -1 crash-$fault.log)"
    grep -q 'c10::\|frame #' crash-$fault.log && fail "crash $fault: stack frames on the terminal"
    kinds=$((kinds + 1))
  done
  # A crash in the plugin's constructor, before the child claimed its run: a failed row all the same.
  db=$WORK/crash-construct.sqlite
  "$HTM" run "$crash" --variant crashy --seed 0 --set 'policy.when="construct"' \
    $(run_args "$db" "$WORK/crash-runs") > crash-construct.log 2>&1
  rc=$?
  injected=$((injected + 1))
  [[ $rc == 1 ]] || fail "crash in construction: exit $rc: $(tail -2 crash-construct.log)"
  error=$(sql "$db" "SELECT status || ': ' || error FROM runs")
  [[ $error == "failed: crashed: SIGSEGV"*"policy plugin 'faulty' 0.9.1 ("*"during construction"* ]] ||
    fail "crash in construction: recorded as '$error'"
  db=$WORK/crash.sqlite
  # --jobs 2: two crashing runs and two good ones; the good ones finish, the last line counts the failures.
  local -a study=("$crash" --variant crashy --variant random $(run_args "$db" "$WORK/crash-runs"))
  "$HTM" run "${study[@]}" --jobs 2 > crash-jobs.log 2>&1
  rc=$?
  injected=$((injected + 2))
  [[ $rc == 1 ]] || fail "crash --jobs: exit $rc: $(tail -2 crash-jobs.log)"
  [[ $(sql "$db" "SELECT group_concat(variant || ':' || status, ' ') FROM (SELECT * FROM runs ORDER BY variant, seed)") == \
     "crashy:failed crashy:failed random:finished random:finished" ]] ||
    fail "crash --jobs: $(sql "$db" "SELECT group_concat(variant || seed || status) FROM runs")"
  tail -1 crash-jobs.log | grep -q '^htm: 2 of 4 runs failed' || fail "crash --jobs: last line: $(tail -1 crash-jobs.log)"
  [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'running'") == 0 ]] || fail "crash: a run left running"
  # No crash loop: the next htm run resumes a crashed run once; a second crash at the same step holds it.
  id=$(sql "$db" "SELECT min(id) FROM runs WHERE status = 'failed'")
  "$HTM" run "${study[@]}" --jobs 2 > crash-again.log 2>&1
  grep -q "resuming run $id (it was crashed at step" crash-again.log || fail "crash: run $id not resumed once: $(head -3 crash-again.log)"
  [[ $(sql "$db" "SELECT value FROM tags WHERE run_id = $id AND key = 'crashes'") == 2 ]] ||
    fail "crash: run $id crash count $(sql "$db" "SELECT value FROM tags WHERE run_id = $id AND key = 'crashes'")"
  "$HTM" run "${study[@]}" --jobs 2 > crash-held.log 2>&1
  grep -q "run $id is not resumed: it crashed 2 times at step" crash-held.log || fail "crash: run $id not held: $(tail -3 crash-held.log)"
  "$HTM" runs --db "$db" > crash-list.log 2>&1
  grep -q "htm resume $id --force retries it" crash-list.log || fail "crash: htm runs does not say why run $id is held"
  "$HTM" resume $id --db "$db" > crash-resume.log 2>&1 && fail "crash: htm resume without --force retried a held run"
  "$HTM" resume $id --force --db "$db" > crash-resume.log 2>&1
  [[ $(sql "$db" "SELECT value FROM tags WHERE run_id = $id AND key = 'crashes'") == 3 ]] ||
    fail "crash: htm resume --force did not retry run $id: $(tail -2 crash-resume.log)"
  [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'running'") == 0 ]] || fail "crash: a run left running"
  [[ $(sql "$db" "PRAGMA integrity_check") == ok ]] || fail "crash: integrity_check"
  # A supervised run's metrics are those of the same run trained in-process (HTM_RUN_BOARD set to
  # something that is no board: the process trains itself, as every run did before supervision).
  "$HTM" run "$STUDY" --variant learned --seed 1 --set train.epochs=2 $(run_args "$WORK/sup.sqlite" "$WORK/sup-runs") > sup.log 2>&1
  HTM_RUN_BOARD=$WORK/no-board "$HTM" run "$STUDY" --variant learned --seed 1 --set train.epochs=2 \
    $(run_args "$WORK/inproc.sqlite" "$WORK/sup-runs") > inproc.log 2>&1
  [[ -n "$(series "$WORK/sup.sqlite" 1)" && "$(series "$WORK/sup.sqlite" 1)" == "$(series "$WORK/inproc.sqlite" 1)" ]] ||
    fail "crash: a supervised run's metrics differ from the same run in-process"
  # Data-parallel ranks are supervised too: --nproc 2, the policy segfaults in rank 1 only, then in
  # both ranks. The run is failed naming the signal, plugin, step and rank; the ranks start again
  # for the study's other run (skipping the crashed one, as a single run's crash waits for the
  # next htm run); no process is left.
  local nproc=$WORK/nproc.sqlite target
  for target in crashy_rank1 crashy; do
    rm -f "$nproc"*
    HTM_DIST_TIMEOUT=20 "$HTM" run "$crash" --variant $target --variant random --seed 0 --nproc 2 \
      $(run_args "$nproc" "$WORK/nproc-runs") > nproc.log 2>&1
    rc=$?
    injected=$((injected + 1))
    [[ $rc == 1 ]] || fail "crash --nproc (rank $target): exit $rc: $(tail -2 nproc.log)"
    error=$(sql "$nproc" "SELECT status || ': ' || error FROM runs WHERE variant LIKE 'crashy%'")
    [[ $error == "failed: crashed: SIGSEGV"*"policy plugin 'faulty' 0.9.1 ("*") at step "*" (rank "*" of 2)"* ]] ||
      fail "crash --nproc (rank $target): the run recorded as '$error'"
    [[ $target == crashy_rank1 && $error != *"(rank 1 of 2)"* ]] && fail "crash --nproc: rank 1's crash not named: $error"
    [[ $(sql "$nproc" "SELECT group_concat(status, ' ') FROM (SELECT status FROM runs ORDER BY variant)") == "failed finished" ]] ||
      fail "crash --nproc (rank $target): $(sql "$nproc" "SELECT group_concat(variant || ':' || status, ' ') FROM runs")"
    grep -q "crashed in this htm run; the next htm run resumes it" nproc.log ||
      fail "crash --nproc (rank $target): the crashed run not skipped by the ranks started again: $(tail -3 nproc.log)"
    sleep 1
    pgrep -f "nproc-runs" > /dev/null && { fail "crash --nproc (rank $target): a rank outlived the launch"; pkill -9 -f "nproc-runs"; }
  done
  # --nproc 2, a crash in the policy's constructor in both ranks, before either claimed the run: a
  # failed row all the same, naming the plugin, the rank and construction; no rank left.
  rm -f "$nproc"*
  HTM_DIST_TIMEOUT=20 "$HTM" run "$crash" --variant crashy --seed 0 --nproc 2 --set 'policy.when="construct"' \
    $(run_args "$nproc" "$WORK/nproc-runs") > nproc-construct.log 2>&1
  rc=$?
  injected=$((injected + 1))
  [[ $rc == 1 ]] || fail "crash in construction --nproc: exit $rc: $(tail -2 nproc-construct.log)"
  error=$(sql "$nproc" "SELECT status || ': ' || error FROM runs")
  [[ $error == "failed: crashed: SIGSEGV"*"policy plugin 'faulty' 0.9.1 ("*"(rank "*" of 2) during construction"* ]] ||
    fail "crash in construction --nproc: recorded as '$error'"
  sleep 1
  pgrep -f "nproc-runs" > /dev/null && { fail "crash in construction --nproc: a rank outlived the launch"; pkill -9 -f "nproc-runs"; }
  # Two ranks started as torchrun starts them (RANK, WORLD_SIZE; no --nproc): each htm run
  # supervises its rank; rank 1's crash is recorded ahead of rank 0's own failure; no rank left.
  rm -f "$nproc"*
  local port=$((30500 + RANDOM % 400)) outside="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 HTM_DIST_TIMEOUT=20"
  env $outside MASTER_PORT=$port RANK=1 "$HTM" run "$crash" --variant crashy_rank1 --seed 0 \
    $(run_args "$nproc" "$WORK/outside-runs") > outside1.log 2>&1 &
  local rank1=$!
  env $outside MASTER_PORT=$port RANK=0 "$HTM" run "$crash" --variant crashy_rank1 --seed 0 \
    $(run_args "$nproc" "$WORK/outside-runs") > outside0.log 2>&1
  wait $rank1; rc=$?
  injected=$((injected + 1))
  [[ $rc == 1 ]] || fail "crash under an outside launcher: rank 1 exit $rc: $(tail -2 outside1.log)"
  error=$(sql "$nproc" "SELECT status || ': ' || error FROM runs")
  [[ $error == "failed: crashed: SIGSEGV"*"policy plugin 'faulty' 0.9.1 ("*") at step "*" (rank 1 of 2); then "* ]] ||
    fail "crash under an outside launcher: recorded as '$error'"
  sleep 1
  pgrep -f "outside-runs" > /dev/null && { fail "crash under an outside launcher: a rank outlived it"; pkill -9 -f "outside-runs"; }
  export HTM_PLUGIN_PATH=
  ok "crash: $kinds crash kinds recorded failed with signal, plugin and step; a constructor's crash recorded (one process and --nproc 2); --jobs study went on; a crash loop held; supervised = in-process bit for bit; --nproc 2: a rank's crash named, study went on, no rank left; the same crash under an outside launcher named"
}

section_corrupt() {  # one damaged 4 KiB page: htm run writes nothing into the file; htm db check says what to do
  ref
  local bad=$WORK/bad.sqlite rc pages before
  cp ref.sqlite "$bad"
  # What people wrote from the pages (a note, a tag, an archived flag, a view) is recovered too.
  sql "$bad" "INSERT INTO run_notes VALUES (1, 'kept note', 1); INSERT INTO run_user_tags VALUES (1, 'owner', 'ana', 1);
    INSERT INTO run_archived VALUES (1, 1, 1); INSERT INTO saved_views VALUES ('mine', 'sort=seed', 1);
    PRAGMA wal_checkpoint(TRUNCATE)" > /dev/null
  pages=$(( $(stat -c %s "$bad") / 4096 ))
  dd if=/dev/urandom of="$bad" bs=4096 seek=$((pages / 2)) count=1 conv=notrunc status=none
  before=$(sha256sum < "$bad")
  "$HTM" run "$STUDY" --variant random --seed 1 --set train.epochs=1 $(run_args "$bad" "$WORK/bad-runs") > bad.log 2>&1
  rc=$?
  injected=$((injected + 1))
  crashed $rc bad.log && { crashes=$((crashes + 1)); fail "corrupt: crash (rc $rc)"; }
  [[ $rc == 1 ]] || fail "corrupt: htm run exit $rc: $(tail -2 bad.log)"
  [[ $(wc -l < bad.log) == 1 ]] && grep -q "^error: results database '$bad' is malformed (SQLite's quick_check: " bad.log ||
    fail "corrupt: not one line naming the file: $(cat bad.log)"
  [[ $(sha256sum < "$bad") == "$before" ]] || fail "corrupt: htm run changed the malformed file"
  [[ ! -s $bad-wal ]] || fail "corrupt: htm run wrote a WAL for the malformed file"
  "$HTM" db check --db "$bad" > check.log 2>&1 && fail "corrupt: htm db check passed a malformed file"
  grep -q "htm db recover --db $bad --out recovered.sqlite" check.log || fail "corrupt: htm db check gives no recovery: $(tail -3 check.log)"
  "$HTM" db recover --db "$bad" --out recovered.sqlite > recover.log 2>&1 || fail "corrupt: htm db recover: $(tail -3 recover.log)"
  grep -q "unreadable, skipped: \|every row was readable" recover.log || fail "corrupt: htm db recover says nothing of lost rows: $(cat recover.log)"
  "$HTM" db check --db recovered.sqlite > check.log 2>&1 || fail "corrupt: the recovered file fails the check: $(tail -3 check.log)"
  "$HTM" runs --db recovered.sqlite --archived > check.log 2>&1 && grep -q finished check.log ||
    fail "corrupt: the recovered file lost its run: $(tail -3 check.log)"
  local kept
  kept=$(sql recovered.sqlite "SELECT (SELECT text FROM run_notes) || (SELECT value FROM run_user_tags) ||
    (SELECT archived FROM run_archived) || (SELECT state FROM saved_views)")
  [[ $kept == "kept noteana1sort=seed" ]] || grep -q "run_notes\|run_user_tags\|run_archived\|saved_views" recover.log ||
    fail "corrupt: the recovered file lost its note, user tag, archived flag or view ($kept) and did not say so"
  "$HTM" run "$STUDY" --variant random --seed 1 --set train.epochs=1 $(run_args "$WORK/recovered.sqlite" "$WORK/bad-runs") > rec.log 2>&1 ||
    fail "corrupt: htm run into the recovered file: $(tail -2 rec.log)"
  [[ $(sha256sum < "$bad") == "$before" ]] || fail "corrupt: checking or recovering changed the malformed file"
  ok "corrupt: one damaged page: htm run refused in one line, file unchanged; htm db recover gave a sound file with the run"
}

section_disk() {  # a full disk while writing a checkpoint fails the run cleanly
  mkdir -p full
  if ! mount -t tmpfs -o size=48k tmpfs full 2> /dev/null; then
    echo "disk: SKIPPED (cannot mount a tmpfs here; not root or no CAP_SYS_ADMIN)"
    return
  fi
  local db=$WORK/disk.sqlite rc
  "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=1 $(run_args "$db" "$WORK/full/runs") > disk.log 2>&1
  rc=$?
  injected=$((injected + 1))
  crashed $rc disk.log && { crashes=$((crashes + 1)); fail "disk: crash (rc $rc)"; }
  [[ $rc == 1 ]] || fail "disk: exit $rc, expected 1"
  grep -q 'No space left on device' disk.log || fail "disk: no clear message: $(tail -2 disk.log)"
  [[ $(sql "$db" "SELECT status FROM runs") == failed ]] || fail "disk: run not recorded failed"
  [[ -z $(find full -name '*.tmp') ]] || fail "disk: a temporary checkpoint was left behind"
  umount full
  ok "disk: full tmpfs, run failed with a message, no temporary file left"
}

section_input() {  # bad values and files: one clear line, non-zero exit, no crash, no run row
  local db=$WORK/input.sqlite n=0
  local -a bad=(model.heads=0 train.batch_size=0 train.batch_size=-1 train.epochs=0
    train.epochs=-3 train.lr=nan train.lr=-1 train.lr=inf model.dim=0 model.dropout=2 train.rho0=nan
    train.train_samples=-5 train.eval_batch_size=0 'experiment.name="../../x"' model.dim=15
    policy.heads=-1 policy.score_hidden=-1 merge.init_scale=-1 loss.point_set.weight=-1 loss.point_set.weight=nan)
  for value in "${bad[@]}"; do
    "$HTM" run "$STUDY" --variant learned --seed 0 --set "$value" $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
    local rc=$?
    n=$((n + 1))
    crashed $rc in.log && { crashes=$((crashes + 1)); fail "--set $value: crash (rc $rc)"; }
    [[ $rc == 1 ]] || fail "--set $value: exit $rc"
    [[ $(grep -c '^error: ' in.log) == 1 ]] || fail "--set $value: not one error line: $(tail -3 in.log)"
    grep -q 'libtorch\|c10::' in.log && fail "--set $value: libtorch text: $(tail -3 in.log)"
  done
  # Memory: a run whose estimate exceeds what is available is refused with both figures;
  # --ignore-memory trains it (--force, split in two, is refused naming both). A width whose
  # weights cannot be allocated fails in one line, without C++ frames.
  HTM_MEMORY_AVAILABLE_MIB=50 "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=1 \
    $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
  local rc=$?
  n=$((n + 1))
  [[ $rc == 1 && $(wc -l < in.log) == 1 ]] &&
    grep -q "^error: \[faults/learned seed 0\] needs about .* MiB (process with weights and data .*, more than the 50 MiB available (HTM_MEMORY_AVAILABLE_MIB); htm run --ignore-memory trains it anyway" in.log ||
    fail "memory estimate: exit $rc: $(cat in.log)"
  # A width whose data and weights alone pass what is available is refused as they are allocated.
  HTM_MEMORY_AVAILABLE_MIB=50 "$HTM" run "$STUDY" --variant learned --seed 0 --set model.dim=2048 \
    $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
  rc=$?
  n=$((n + 1))
  [[ $rc == 1 && $(wc -l < in.log) == 1 ]] &&
    grep -q "^error: \[faults/learned seed 0\] needs more than the 50 MiB available (HTM_MEMORY_AVAILABLE_MIB) to be assembled: its data and weights held [0-9]* MiB when [0-9]* MiB more were asked to allocate; htm run --ignore-memory trains it anyway" in.log ||
    fail "memory at assembly: exit $rc: $(cat in.log)"
  HTM_MEMORY_AVAILABLE_MIB=50 "$HTM" run "$STUDY" --variant learned --seed 0 --set train.epochs=1 --ignore-memory \
    $(run_args "$WORK/forced.sqlite" "$WORK/input-runs") > in.log 2>&1 || fail "memory --ignore-memory: exit $?: $(tail -2 in.log)"
  "$HTM" run "$STUDY" --variant learned --seed 0 --force $(run_args "$WORK/forced.sqlite" "$WORK/input-runs") > in.log 2>&1
  rc=$?
  n=$((n + 1))
  [[ $rc == 1 ]] && grep -q "^error: --force was split in two: --rerun .*, --ignore-memory " in.log ||
    fail "--force: not refused naming --rerun and --ignore-memory: exit $rc: $(tail -2 in.log)"
  "$HTM" run "$STUDY" --variant learned --seed 0 --set model.dim=65536 $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
  rc=$?
  n=$((n + 1))
  crashed $rc in.log && { crashes=$((crashes + 1)); fail "dim=65536: crash (rc $rc)"; }
  [[ $rc == 1 && $(grep -c . in.log) == 1 ]] && grep -qE 'allocate|cannot be assembled' in.log ||
    fail "dim=65536: exit $rc, not one line: $(head -c 600 in.log)"
  # A tensor the system refuses outright (never counted: the allocator throws first) is bad input too.
  "$HTM" run "$STUDY" --variant learned --seed 0 --set model.mlp_ratio=99999999999 $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
  rc=$?
  n=$((n + 1))
  crashed $rc in.log && { crashes=$((crashes + 1)); fail "mlp_ratio=99999999999: crash (rc $rc)"; }
  [[ $rc == 1 && $(grep -c . in.log) == 1 ]] &&
    grep -q '^error: \[faults/learned seed 0\] cannot be assembled: one of its tensors asked for [0-9.]* GiB, which the system refused' in.log ||
    fail "mlp_ratio=99999999999: exit $rc, not one line: $(head -c 600 in.log)"
  # A schedule of zeros merges nothing: a valid (if pointless) study, which once crashed.
  "$HTM" run "$STUDY" --variant learned --seed 0 --set "model.schedule=[0]" --set train.epochs=1 \
    $(run_args "$WORK/zero.sqlite" "$WORK/input-runs") > in.log 2>&1 || fail "schedule [0]: exit $?: $(tail -3 in.log)"
  [[ ! -f $db ]] || [[ $(sql "$db" "SELECT count(*) FROM runs") == 0 ]] || fail "input: a bad config left a run row"
  # A diverging Trees run ends with a message instead of hanging in the matcher.
  timeout 120 "$HTM" run "$STUDY" --variant learned --seed 0 --set train.lr=1e308 $(run_args "$db" "$WORK/input-runs") > div.log 2>&1
  local rc=$?
  [[ $rc == 1 ]] || fail "lr=1e308: exit $rc (124 means it hung): $(tail -2 div.log)"
  grep -q 'training diverged' div.log || fail "lr=1e308: no divergence message: $(tail -2 div.log)"
  # Empty and comment-only files.
  : > empty.toml
  printf '# nothing\n\n' > comments.toml
  for f in empty.toml comments.toml; do
    "$HTM" run $f > in.log 2>&1; local rc=$?
    n=$((n + 1))
    [[ $rc == 1 ]] && grep -q 'sets nothing' in.log || fail "$f: exit $rc: $(tail -3 in.log)"
  done
  # IDX files whose header lies, and an empty one.
  mkdir -p idx
  printf '\x00\x00\x08\x03\x7f\xff\xff\xff\x7f\xff\xff\xff\x00\x00\x00\x1c' > idx/train-images-idx3-ubyte
  printf '\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02' > idx/train-labels-idx1-ubyte
  printf '\x00\x00\x08\x03\x00\x00\x00\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' > idx/t10k-images-idx3-ubyte
  printf '\x00\x00\x08\x01\x00\x00\x00\x00' > idx/t10k-labels-idx1-ubyte
  "$HTM" run "$SRC/experiments/quickstart.toml" --set "dataset.root=\"$WORK/idx\"" $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
  local rc=$?
  n=$((n + 1))
  [[ $rc == 1 ]] && grep -q 'not a valid IDX file: its header declares more than 16 GiB' in.log ||
    fail "huge IDX header: exit $rc: $(tail -3 in.log)"
  printf '\x00\x00\x08\x03\x00\x00\x00\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' > idx/train-images-idx3-ubyte
  "$HTM" run "$SRC/experiments/quickstart.toml" --set "dataset.root=\"$WORK/idx\"" $(run_args "$db" "$WORK/input-runs") > in.log 2>&1
  rc=$?
  n=$((n + 1))
  [[ $rc == 1 ]] && grep -q 'holds no data' in.log || fail "empty IDX: exit $rc: $(tail -3 in.log)"
  injected=$((injected + n))
  ok "input: $n bad values and files refused with one line each; a diverging run stops with a message"
}

section_plugins() {  # damaged libraries on the search path: every command still works, with warnings
  mkdir -p plugins
  local lib
  lib=$(ls "$(dirname "$HTM")"/plugins/htm_policy_random.so)
  head -c $(( $(stat -c %s "$lib") / 2 )) "$lib" > plugins/htm_policy_truncated.so
  head -c 4096 /dev/urandom > plugins/htm_policy_garbage.so
  ln -s htm_loss_b.so plugins/htm_loss_a.so
  ln -s htm_loss_a.so plugins/htm_loss_b.so
  HTM_PLUGIN_PATH=$WORK/plugins "$HTM" plugins > pl.log 2>&1
  local rc=$?
  injected=$((injected + 3))
  crashed $rc pl.log && { crashes=$((crashes + 1)); fail "plugins: crash (rc $rc)"; }
  [[ $rc == 0 ]] || fail "plugins: exit $rc"
  grep -q 'htm_policy_truncated.so.: it is truncated' pl.log || fail "plugins: truncated not named"
  grep -q 'invalid ELF header' pl.log || fail "plugins: garbage not named"
  grep -q 'Too many levels of symbolic links' pl.log || fail "plugins: symlink loop not named"
  HTM_PLUGIN_PATH=$WORK/plugins "$HTM" run "$STUDY" --variant random --seed 0 --set train.epochs=1 \
    $(run_args "$WORK/pl.sqlite" "$WORK/pl-runs") > pl.log 2>&1 || fail "plugins: a run with damaged plugins on the path failed"
  HTM_PLUGIN_PATH=$WORK/plugins "$HTM" run "$STUDY" --variant learned --seed 0 --set policy.plugin='"truncated"' \
    $(run_args "$WORK/pl.sqlite" "$WORK/pl-runs") > pl.log 2>&1
  grep -q "policy plugin 'truncated' was found but not loaded" pl.log || fail "plugins: the refused plugin not named: $(tail -3 pl.log)"
  ok "plugins: truncated, garbage and looping libraries named; commands work"
}

section_files() {  # other people's databases; htm query only reads
  local ro_media
  sqlite3 foreign.sqlite "CREATE TABLE notes(x); INSERT INTO notes VALUES (1);"
  local before after
  before=$(sha256sum foreign.sqlite)
  for cmd in "runs --db foreign.sqlite" "query 'SELECT 1' --db foreign.sqlite"; do
    eval "\"$HTM\" $cmd" > f.log 2>&1 && fail "foreign: '$cmd' accepted another program's database"
    grep -q 'not an htm results database' f.log || fail "foreign: no clear message for '$cmd': $(tail -3 f.log)"
  done
  "$HTM" run "$STUDY" --variant random --seed 0 --set train.epochs=1 $(run_args "$WORK/foreign.sqlite" "$WORK/f-runs") > f.log 2>&1 &&
    fail "foreign: htm run wrote into another program's database"
  after=$(sha256sum foreign.sqlite)
  [[ $before == "$after" ]] || fail "foreign: the file changed"
  [[ ! -e foreign.sqlite-wal ]] || fail "foreign: switched to WAL"
  ref
  cp ref.sqlite q.sqlite
  for statement in "DELETE FROM runs" "DROP TABLE metrics" "UPDATE meta SET value = '1'" \
    "ATTACH DATABASE 'x.sqlite' AS x" "VACUUM INTO 'copy.sqlite'" "PRAGMA journal_mode=DELETE"; do
    "$HTM" query "$statement" --db q.sqlite > q.log 2>&1 && fail "query: '$statement' was run"
  done
  [[ ! -e x.sqlite && ! -e copy.sqlite ]] || fail "query: a file was written"
  [[ $(sql q.sqlite "SELECT count(*) FROM runs") == 1 ]] || fail "query: rows changed"
  "$HTM" query "DELETE FROM tags" --db q.sqlite --write > q.log 2>&1 || fail "query --write refused: $(tail -3 q.log)"
  # Read-only media: the reading commands still work (a WAL database there has no -shm file).
  mkdir -p media ro
  cp ref.sqlite media/
  if mount --bind media ro 2> /dev/null && mount -o remount,bind,ro ro 2> /dev/null; then
    "$HTM" runs --db ro/ref.sqlite > ro.log 2>&1 && grep -q finished ro.log || fail "read-only media: htm runs: $(tail -3 ro.log)"
    "$HTM" query "SELECT count(*) FROM metrics" --db ro/ref.sqlite > ro.log 2>&1 || fail "read-only media: htm query: $(tail -3 ro.log)"
    "$HTM" compare faults --db ro/ref.sqlite > ro.log 2>&1 || fail "read-only media: htm compare: $(tail -3 ro.log)"
    umount ro
    ro_media="; runs, query and compare work on read-only media"
  else
    umount ro 2> /dev/null
    ro_media="; read-only media SKIPPED (no bind mount here)"
  fi
  ok "files: a foreign database refused and unchanged; query refused 6 writes$ro_media"
}

section_lock() {  # someone holds the database's write lock for 35 s: the run waits, then finishes
  local db=$WORK/lock.sqlite rc
  "$HTM" run "$STUDY" --variant random --seed 0 --set train.epochs=4 $(run_args "$db" "$WORK/lock-runs") > lock.log 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do  # until the run's row exists (the store is open and its timeout set)
    [[ -f $db && $(sql "$db" "SELECT count(*) FROM runs" 2> /dev/null) == 1 ]] && break
    sleep 0.1
  done
  # .timeout: BEGIN IMMEDIATE waits for the run's own write in progress instead of failing at once.
  (echo ".timeout 10000"; echo "BEGIN IMMEDIATE;"; sleep 35; echo "COMMIT;") | sqlite3 "$db" > lockshell.log 2>&1
  [[ -s lockshell.log ]] && fail "lock: the outside lock was never held: $(head -2 lockshell.log)"
  injected=$((injected + 1))
  wait $pid; rc=$?
  [[ $rc == 0 ]] || fail "lock: the run failed under an outside lock (rc $rc): $(tail -2 lock.log)"
  [[ $(sql "$db" "SELECT status FROM runs") == finished ]] || fail "lock: run not finished"
  ok "lock: an outside write lock held 35 s paused the run, which then finished"
}

# ---- hangs: a policy that sleeps forever (as a deadlock, a stuck file system or a lost GPU would)
# in one run, in a --jobs study, in one rank and in every rank of --nproc 2, and in one rank under an
# outside launcher. The watchdog (runtime.stall_timeout 3 s) fails the run naming the rank, step and
# call, stops every process, and the study goes on.
stall_worst=0
stalled_within() { # seconds: the slowest detection so far, for the last line
  (( $1 > stall_worst )) && stall_worst=$1
  (( $1 <= 3 + 30 )) || fail "$2: failed after $1 s, more than stall_timeout + 30 s"
}
section_watchdog() {
  local crash=$SRC/tests/faults/crash.toml db error began rc
  export HTM_PLUGIN_PATH=$(dirname "$HTM")/test-plugins
  local -a quick=(--set runtime.stall_timeout=3)
  local want="stalled: no progress for [34] s (runtime.stall_timeout 3 s) in policy plugin 'faulty' 0.9.1 (*htm_policy_faulty.so) in choose_merges at step "
  # One run.
  db=$WORK/hang.sqlite began=$SECONDS
  "$HTM" run "$crash" --variant hang --seed 0 "${quick[@]}" $(run_args "$db" "$WORK/hang-runs") > hang.log 2>&1
  rc=$?
  injected=$((injected + 1))
  stalled_within $((SECONDS - began)) "hang"
  [[ $rc == 1 ]] || fail "hang: exit $rc: $(tail -2 hang.log)"
  error=$(sql "$db" "SELECT status || ': ' || error FROM runs")
  # shellcheck disable=SC2053
  [[ $error == failed:\ $want*" of 64; the watchdog killed its processes" ]] || fail "hang: recorded as '$error'"
  # --jobs 2: the hung run fails, the others finish.
  db=$WORK/hang-jobs.sqlite began=$SECONDS
  "$HTM" run "$crash" --variant hang --variant random --seed 0 --seed 1 --jobs 2 "${quick[@]}" \
    $(run_args "$db" "$WORK/hang-runs") > hang-jobs.log 2>&1
  rc=$?
  injected=$((injected + 2))
  stalled_within $((SECONDS - began)) "hang --jobs 2"
  [[ $rc == 1 ]] || fail "hang --jobs: exit $rc: $(tail -2 hang-jobs.log)"
  [[ $(sql "$db" "SELECT group_concat(variant || ':' || status, ' ') FROM (SELECT * FROM runs ORDER BY variant, seed)") == \
     "hang:failed hang:failed random:finished random:finished" ]] ||
    fail "hang --jobs: $(sql "$db" "SELECT group_concat(variant || seed || status) FROM runs")"
  tail -1 hang-jobs.log | grep -q '^htm: 2 of 4 runs failed' || fail "hang --jobs: last line: $(tail -1 hang-jobs.log)"
  # --nproc 2: rank 1 hangs (rank 0 waits for it in a collective), then both ranks hang; the ranks
  # start again for the study's other run.
  local target
  for target in hang_rank1 hang; do
    db=$WORK/hang-nproc-$target.sqlite began=$SECONDS
    "$HTM" run "$crash" --variant $target --variant random --seed 0 --nproc 2 "${quick[@]}" \
      $(run_args "$db" "$WORK/hang-runs") > hang-nproc.log 2>&1
    rc=$?
    injected=$((injected + 1))
    stalled_within $((SECONDS - began)) "hang --nproc 2 ($target)"
    [[ $rc == 1 ]] || fail "hang --nproc ($target): exit $rc: $(tail -2 hang-nproc.log)"
    error=$(sql "$db" "SELECT status || ': ' || error FROM runs WHERE variant = '$target'")
    [[ $error == failed:\ $want*" (rank "[01]" of 2); the watchdog killed its processes"* ]] ||
      fail "hang --nproc ($target): recorded as '$error'"
    [[ $target == hang_rank1 && $error != *"(rank 1 of 2)"* ]] && fail "hang --nproc: rank 1 not named: $error"
    [[ $(sql "$db" "SELECT status FROM runs WHERE variant = 'random'") == finished ]] ||
      fail "hang --nproc ($target): the study's other run: $(sql "$db" "SELECT group_concat(variant || ':' || status, ' ') FROM runs"); the launcher said: $(grep -v ' epoch [0-9]* step ' hang-nproc.log | tail -8)"
  done
  # Two ranks as torchrun starts them: rank 1's own htm run finds it stalled; rank 0 fails at its
  # next collective (the peer is gone); the run names rank 1's stall first.
  db=$WORK/hang-outside.sqlite began=$SECONDS
  local port=$((30900 + RANDOM % 400)) outside="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1"
  env $outside MASTER_PORT=$port RANK=1 "$HTM" run "$crash" --variant hang_rank1 --seed 0 "${quick[@]}" \
    $(run_args "$db" "$WORK/hang-runs") > hang-outside1.log 2>&1 &
  local rank1=$!
  env $outside MASTER_PORT=$port RANK=0 "$HTM" run "$crash" --variant hang_rank1 --seed 0 "${quick[@]}" \
    $(run_args "$db" "$WORK/hang-runs") > hang-outside0.log 2>&1
  wait $rank1; rc=$?
  injected=$((injected + 1))
  stalled_within $((SECONDS - began)) "hang under an outside launcher"
  [[ $rc == 1 ]] || fail "hang under an outside launcher: rank 1 exit $rc: $(tail -2 hang-outside1.log)"
  error=$(sql "$db" "SELECT status || ': ' || coalesce(error, '(no error)') FROM runs")
  [[ $error == failed:\ $want*" (rank 1 of 2); the watchdog killed its processes; then rank 0 of 2: "* ]] ||
    fail "hang under an outside launcher: recorded as '$error' ($(sql "$db" "SELECT count(*) FROM runs") rows); rank 0 said: $(grep -v ' epoch [0-9]* step ' hang-outside0.log | tail -4); rank 1: $(grep -v ' epoch [0-9]* step ' hang-outside1.log | tail -4)"
  export HTM_PLUGIN_PATH=
  ok "watchdog: a hung run, a hung run in --jobs 2, rank 1 and both ranks of --nproc 2, rank 1 under an outside launcher: each failed within $stall_worst s (stall_timeout 3 s) naming the rank, step and call; the study went on"
}

# ---- stops: SIGTERM/SIGINT while a child hangs (stop_grace 3 s, no watchdog before 60 s). The
# parent is gone within the grace + 5 s, every affected run recorded interrupted, and a run stopped
# that way resumes to the uninterrupted run's metrics bit for bit.
stop_worst=0
gone_within() { # pid limit what: waits for pid (started in the background), checks the time it took
  local began=$SECONDS rc
  wait "$1"; rc=$?
  (( SECONDS - began > stop_worst )) && stop_worst=$((SECONDS - began))
  (( SECONDS - began <= $2 )) || fail "$3: the parent took $((SECONDS - began)) s to go, more than $2 s"
  return $rc
}
until_running() { # db: until one of its runs is training (up to 60 s)
  local tries=0
  until [[ $(sql "$1" "SELECT count(*) FROM runs WHERE status = 'running'" 2> /dev/null) -ge 1 ]] || ((tries >= 600)); do
    sleep 0.1
    tries=$((tries + 1))
  done
  sleep 1.5  # into the hang (its 31st merge call: a few steps in)
}
section_stop() {
  local crash=$SRC/tests/faults/crash.toml db pid rc sig
  export HTM_PLUGIN_PATH=$(dirname "$HTM")/test-plugins
  local -a slow=(--set runtime.stall_timeout=60 --set runtime.stop_grace=3)
  # One run, SIGTERM then SIGINT: the child cannot stop; killed at the grace, recorded interrupted.
  for sig in TERM INT; do
    db=$WORK/stop-$sig.sqlite
    "$HTM" run "$crash" --variant hang --seed 0 "${slow[@]}" $(run_args "$db" "$WORK/stop-runs") > stop.log 2>&1 &
    pid=$!
    until_running "$db"
    kill -$sig $pid
    injected=$((injected + 1))
    gone_within $pid 8 "SIG$sig"; rc=$?
    [[ $rc == 130 || $rc == 143 ]] || fail "SIG$sig with a hung child: exit $rc: $(tail -2 stop.log)"
    [[ $(sql "$db" "SELECT status || ': ' || error FROM runs") == "interrupted: interrupted by SIG$sig "*"; its process did not stop within 3 s and was killed; htm run resumes it" ]] ||
      fail "SIG$sig with a hung child: recorded as '$(sql "$db" "SELECT status || ': ' || error FROM runs")'"
  done
  # A second Ctrl-C kills at once, and still records the run.
  db=$WORK/stop-twice.sqlite
  "$HTM" run "$crash" --variant hang --seed 0 "${slow[@]}" $(run_args "$db" "$WORK/stop-runs") > stop.log 2>&1 &
  pid=$!
  until_running "$db"
  kill -INT $pid; sleep 0.3; kill -INT $pid
  injected=$((injected + 1))
  gone_within $pid 5 "a second SIGINT"
  [[ $(sql "$db" "SELECT status || ': ' || error FROM runs") == "interrupted: "*"; ended at a second signal; htm run resumes it" ]] ||
    fail "a second SIGINT: recorded as '$(sql "$db" "SELECT status || ': ' || error FROM runs")'"
  # kill -9 of htm run: its hung child gets SIGTERM from the kernel (it asked for it when its parent
  # dies) and, unable to stop, ends itself at the grace + 4 s; the next htm run records it killed.
  db=$WORK/stop-orphan.sqlite
  "$HTM" run "$crash" --variant hang --seed 0 "${slow[@]}" $(run_args "$db" "$WORK/stop-runs") > stop.log 2>&1 &
  pid=$!
  until_running "$db"
  kill -9 $pid
  wait $pid 2> /dev/null
  injected=$((injected + 1))
  local waited=0
  while pgrep -f -- "$WORK/stop-runs" > /dev/null && ((waited < 120)); do sleep 0.1; waited=$((waited + 1)); done
  (( waited < 100 )) || fail "kill -9 of htm run: its hung child outlived it by $((waited / 10)) s (grace 3 s)"
  "$HTM" runs --db "$db" --clean > stop.log 2>&1
  [[ $(sql "$db" "SELECT status FROM runs") == killed ]] || fail "kill -9 of htm run: the run is '$(sql "$db" "SELECT status FROM runs")'"
  # --jobs 2 and --nproc 2, each with a hung child.
  db=$WORK/stop-jobs.sqlite
  "$HTM" run "$crash" --variant hang --variant steady --seed 0 --seed 1 --jobs 2 "${slow[@]}" \
    $(run_args "$db" "$WORK/stop-runs") > stop-jobs.log 2>&1 &
  pid=$!
  until_running "$db"
  kill -TERM $pid
  injected=$((injected + 1))
  gone_within $pid 8 "SIGTERM to --jobs 2"
  [[ $(sql "$db" "SELECT count(*) FROM runs WHERE status = 'interrupted'") -ge 1 ]] ||
    fail "SIGTERM to --jobs 2: $(sql "$db" "SELECT group_concat(variant || seed || status) FROM runs")"
  db=$WORK/stop-nproc.sqlite
  "$HTM" run "$crash" --variant hang_rank1 --seed 0 --nproc 2 "${slow[@]}" $(run_args "$db" "$WORK/stop-runs") > stop-nproc.log 2>&1 &
  pid=$!
  until_running "$db"
  kill -TERM $pid
  injected=$((injected + 1))
  gone_within $pid 8 "SIGTERM to --nproc 2"
  [[ $(sql "$db" "SELECT status FROM runs") == interrupted ]] ||
    fail "SIGTERM to --nproc 2: recorded as '$(sql "$db" "SELECT status || ': ' || error FROM runs")': $(tail -2 stop-nproc.log)"
  # Under an outside launcher: torchrun sends each rank's htm run SIGTERM.
  db=$WORK/stop-outside.sqlite
  local port=$((31300 + RANDOM % 400)) outside="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1" rank1
  env $outside MASTER_PORT=$port RANK=1 "$HTM" run "$crash" --variant hang_rank1 --seed 0 "${slow[@]}" \
    $(run_args "$db" "$WORK/stop-runs") > stop-outside1.log 2>&1 &
  rank1=$!
  env $outside MASTER_PORT=$port RANK=0 "$HTM" run "$crash" --variant hang_rank1 --seed 0 "${slow[@]}" \
    $(run_args "$db" "$WORK/stop-runs") > stop-outside0.log 2>&1 &
  pid=$!
  until_running "$db"
  kill -TERM $pid $rank1
  injected=$((injected + 1))
  gone_within $pid 8 "SIGTERM to rank 0 under an outside launcher"
  gone_within $rank1 8 "SIGTERM to rank 1 under an outside launcher"
  [[ $(sql "$db" "SELECT status FROM runs") == interrupted ]] ||
    fail "SIGTERM under an outside launcher: recorded as '$(sql "$db" "SELECT status || ': ' || error FROM runs")'"
  # Resumed to the same result: the same run hangs in its second epoch (its 121st merge call, about
  # step 45, after the checkpoint at the first epoch's end), is stopped and killed, and resumes
  # without the hang.
  local -a steady=("$crash" --variant steady --seed 0 "${slow[@]}")
  "$HTM" run "${steady[@]}" $(run_args "$WORK/stop-ref.sqlite" "$WORK/stop-runs") > stop-ref.log 2>&1 ||
    fail "stop: the reference run failed: $(tail -2 stop-ref.log)"
  db=$WORK/stop-resume.sqlite
  HTM_FAULTY_HANG_AFTER=120 "$HTM" run "${steady[@]}" $(run_args "$db" "$WORK/stop-runs") > stop-resume.log 2>&1 &
  pid=$!
  until_running "$db"
  sleep 1
  kill -TERM $pid
  injected=$((injected + 1))
  gone_within $pid 8 "SIGTERM before a resume"
  [[ $(sql "$db" "SELECT status FROM runs") == interrupted ]] || fail "stop: the run to resume is '$(sql "$db" "SELECT status FROM runs")'"
  "$HTM" run "${steady[@]}" $(run_args "$db" "$WORK/stop-runs") > stop-resumed.log 2>&1 || fail "stop: the resume failed: $(tail -2 stop-resumed.log)"
  grep -q 'resuming run 1' stop-resumed.log && resumed=$((resumed + 1)) || fail "stop: the run was not resumed: $(head -3 stop-resumed.log)"
  grep -q 'resumed from its checkpoint at step' stop-resumed.log || fail "stop: not resumed from a checkpoint: $(grep -m1 resum stop-resumed.log)"
  if [[ -z "$(series "$db" 1)" || "$(series "$WORK/stop-ref.sqlite" 1)" != "$(series "$db" 1)" ]]; then
    fail "stop: the resumed run's metrics differ from the uninterrupted run's"
    lost=$((lost + 1))
  fi
  # htm serve goes at once.
  "$HTM" serve --db "$WORK/stop-ref.sqlite" --port 0 > serve.log 2>&1 &
  pid=$!
  sleep 1.5
  kill -TERM $pid
  injected=$((injected + 1))
  gone_within $pid 5 "SIGTERM to htm serve"
  export HTM_PLUGIN_PATH=
  ok "stop: SIGTERM, SIGINT, a second SIGINT (one run, --jobs 2, --nproc 2, an outside launcher's ranks, htm serve) with a hung child: parent gone within $stop_worst s (grace 3 s), every run recorded interrupted; a stopped run resumed to the uninterrupted one's metrics bit for bit; a hung child of a killed parent gone within $((waited / 10)) s"
}

# After each section: no process of the suite's left (every htm run names $WORK on its command
# line), no run left 'running' in any of its databases (a malformed one excepted: it has no answer),
# no run board left in the temporary folder (supervisors killed by SIGKILL included).
leftovers() { # section
  local pids db running=0 n boards
  sleep 0.5
  pids=$(pgrep -f -- "$WORK" | tr '\n' ' ')
  if [[ -n $pids ]]; then
    fail "$1: processes left behind: $(ps -o pid=,args= -p ${pids// /,} | cut -c1-160)"
    kill -9 $pids 2> /dev/null
  fi
  # (Not after `kill`: it SIGKILLs the whole tree at once, and a child killed before its main has
  # mapped its board leaves the name; only a board passed by descriptor would not.)
  boards=$(find "$TMPDIR" -maxdepth 1 -name 'htm-board-*' | wc -l)
  [[ $boards == 0 || $1 == kill ]] || fail "$1: $boards run board file(s) left in $TMPDIR"
  rm -f "$TMPDIR"/htm-board-*
  for db in "$WORK"/*.sqlite "$WORK"/*/*.sqlite; do
    [[ -f $db ]] || continue
    n=$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE status = 'running'" 2> /dev/null) || continue
    running=$((running + ${n:-0}))
    [[ ${n:-0} == 0 ]] || fail "$1: $n run(s) left 'running' in $(basename "$db")"
  done
  left_processes=$((left_processes + $(wc -w <<< "$pids"))); left_running=$((left_running + running))
}
left_processes=0 left_running=0
timings=""
declare -A beside_pid=()
for s in $BESIDE; do  # beside the rest: their counts come back in a file
  [[ " $SECTIONS " == *" $s "* ]] || continue
  BESIDE_WORK[$s]=$(mktemp -d "/tmp/htm-faults-$s.XXXXXX")
  (
    WORK=${BESIDE_WORK[$s]} TMPDIR=${BESIDE_WORK[$s]}/tmp
    mkdir -p "$TMPDIR" && cd "$WORK" && failures=0 injected=0 resumed=0 lost=0 section_start=0 began=$SECONDS
    "section_$s"
    leftovers "$s"
    echo "$failures $injected $left_processes $left_running $((SECONDS - began)) $resumed $lost" > "$WORK/counts"
  ) > "${BESIDE_WORK[$s]}/out" 2>&1 &
  beside_pid[$s]=$!
done
rest=""
for s in $SECTIONS; do [[ -n ${beside_pid[$s]:-} ]] || rest+=" $s"; done
SECTIONS=$rest
for s in $SECTIONS; do
  section_start=$failures
  began=$SECONDS
  "section_$s"
  leftovers "$s"
  timings+=" $s $((SECONDS - began)) s,"
done
for s in $BESIDE; do
  [[ -n ${beside_pid[$s]:-} ]] || continue
  wait "${beside_pid[$s]}"
  cat "${BESIDE_WORK[$s]}/out"
  if read -r f i p r t u l < "${BESIDE_WORK[$s]}/counts"; then
    failures=$((failures + f)) injected=$((injected + i)) left_processes=$((left_processes + p))
    left_running=$((left_running + r)) resumed=$((resumed + u)) lost=$((lost + l))
    timings+=" $s $t s (beside the others),"
  else
    fail "$s: the section ended without its counts"
  fi
done
echo
echo "seconds per section:${timings%,}"
echo
echo "faults injected: $injected"
echo "runs resumed: $resumed"
echo "crashes: $crashes"
echo "rows lost: $lost"
echo "left behind after the sections: $left_processes processes, $left_running runs 'running'"
if [[ $failures == 0 ]]; then echo "fault suite passed"; else echo "fault suite: $failures failure(s)"; exit 1; fi
