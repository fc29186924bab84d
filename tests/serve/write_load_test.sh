#!/usr/bin/env bash
# 50 pages writing at once while a run trains into the same file (ctest serve.write_load): a tiny
# run of STEPS steps (one thread, its metrics logged every step) is trained four times into one
# database: alone; beside `htm serve --allow-writes --token` answering rounds of 50 concurrent
# reads (one curl, --parallel-max 50: what the clients cost in CPU alone); beside rounds of 50
# concurrent writes (a user tag per request under a key of its own), a round every PAUSE s until
# the run ends; and alone again (the noise between two quiet runs). Passes when every request was
# answered 200, every write is in the file (none lost) and the runs finished; prints each run's
# step time (median, p95, max of the gaps between its train/loss rows, in ms) for docs/serve.md.
# PAIRS (default 1) repeats the reading and writing runs in turn, readers first: the writes' cost is
# the writers' step time against the readers' beside them (the same clients and server, no lock),
# one ratio a pair, so a machine's drift between pairs is not counted as theirs.
#   usage: write_load_test.sh HTM_BINARY SOURCE_DIR [STEPS [PAUSE [PAIRS]]]
source "$(dirname "$0")/serve_base.sh"
set -uo pipefail
HTM=$(realpath "$1")
SRC=$(realpath "$2")
STEPS=${3:-1000}
WRITERS=50
PAUSE=${4:-0.1}
PAIRS=${5:-1}
WORK=$(mktemp -d /tmp/htm-write-load.XXXXXX)
DB="$WORK/htm.sqlite"
TOKEN="load-$$"
cleanup() {
  [[ -n ${SERVER:-} ]] && kill "$SERVER" 2> /dev/null
  wait 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# With two cores or more, the training runs on the first and the server and the clients on the
# second, so that the step times show what the writes cost it (a lock, the disk), not a shared core.
PIN_TRAIN=() PIN_SERVE=()
if [[ $(nproc) -ge 2 ]] && command -v taskset > /dev/null; then
  PIN_TRAIN=(taskset -c 0) PIN_SERVE=(taskset -c 1)
fi
train() {  # train NAME: a tiny run of STEPS steps of 16 images into $DB
  "${PIN_TRAIN[@]}" "$HTM" run "$SRC/tests/data/tiny.toml" --quiet --db "$DB" --set "experiment.name=\"$1\"" \
    --set "train.train_samples=$((STEPS * 16))" --set 'train.eval_samples=16' --set 'runtime.threads=1' \
    --set "runtime.artifacts=\"$WORK/runs\"" > "$WORK/$1.log" 2>&1
}
step_times() {  # step_times NAME: "median p95 max" ms between consecutive train/loss rows
  sqlite3 -readonly "$DB" "SELECT m.time FROM metrics m JOIN runs r ON r.id = m.run_id
    JOIN experiments e ON e.id = r.experiment_id WHERE e.name = '$1' AND m.split = 'train' AND m.name = 'loss'
    ORDER BY m.step" | python3 -c '
import sys
t = [float(x) for x in sys.stdin]
d = sorted((b - a) * 1000 for a, b in zip(t, t[1:]))
print(f"{d[len(d) // 2]:.2f} {d[int(len(d) * 0.95)]:.2f} {d[-1]:.1f}" if d else "- - -")'
}

train quiet-before || { echo "FAIL: the first run failed: $(tail -3 "$WORK/quiet-before.log")"; exit 1; }
"${PIN_SERVE[@]}" "$HTM" serve --db "$DB" --port 0 --allow-writes --token "$TOKEN" > "$WORK/serve.log" 2>&1 &
SERVER=$!
BASE=$(serve_base "$WORK/serve.log") || { echo "FAIL: htm serve did not start: $(cat "$WORK/serve.log")"; exit 1; }
RUN=$(sqlite3 -readonly "$DB" "SELECT min(id) FROM runs")
# A finished run for each writer to annotate (an answer lists the run's tags: one run for all 50
# would answer with thousands).
sqlite3 "$DB" "WITH RECURSIVE w(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM w WHERE i < $WRITERS)
  INSERT INTO runs (uuid, experiment_id, variant, seed, status, started_at, ended_at)
  SELECT 'write-load-' || i, (SELECT experiment_id FROM runs WHERE id = $RUN), 'load', i, 'finished', 0, 0 FROM w"
FIRST=$(sqlite3 -readonly "$DB" "SELECT min(id) FROM runs WHERE variant = 'load'")

# beside NAME KIND: trains run NAME while rounds of WRITERS concurrent requests (KIND: write, a user
# tag under a key of its own each; read, the run's annotations) go to the server, a round every
# PAUSE s until the run ends. Sets sent, ok, rounds, trained.
beside() {
  train "$1" &
  local trainer=$! config="$WORK/round.curl" codes w
  # Wait for the run to log before writing, so that every round lands while it trains.
  until [[ $(sqlite3 -readonly "$DB" "SELECT count(*) FROM runs r JOIN experiments e ON e.id = r.experiment_id
    WHERE e.name = '$1' AND EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = r.id)" 2> /dev/null) == 1 ]]; do
    kill -0 "$trainer" 2> /dev/null || break
    sleep 0.05
  done
  sent=0 ok=0 rounds=0
  while kill -0 "$trainer" 2> /dev/null; do
    : > "$config"
    for w in $(seq "$WRITERS"); do
      [[ $w != 1 ]] && echo next >> "$config"
      if [[ $2 == write ]]; then
        printf 'url = "%s/api/run/%s/tag"\nheader = "Content-Type: application/json"\nheader = "X-HTM-Token: %s"\n' \
          "$BASE" "$((FIRST + w - 1))" "$TOKEN" >> "$config"
        printf 'data = "{\\"key\\": \\"load_%s_%d_%d\\", \\"value\\": \\"x\\"}"\n' "$1" "$rounds" "$w" >> "$config"
      else
        printf 'url = "%s/api/run/%s/notes"\nheader = "Authorization: Bearer %s"\n' "$BASE" "$((FIRST + w - 1))" \
          "$TOKEN" >> "$config"
      fi
      printf 'write-out = "%%{http_code} %%{time_total}\\n"\noutput = "/dev/null"\n' >> "$config"
    done
    codes=$("${PIN_SERVE[@]}" curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max "$WRITERS" -K "$config" 2> /dev/null)
    sent=$((sent + WRITERS))
    ok=$((ok + $(grep -c '^200 ' <<< "$codes")))
    cut -d' ' -f2 <<< "$codes" >> "$WORK/$1.latency"
    rounds=$((rounds + 1))
    sleep "$PAUSE"
  done
  wait "$trainer"
  trained=$?
}

read_sent=0 read_ok=0 write_sent=0 write_ok=0 ratios=""
for pair in $(seq "$PAIRS"); do
  suffix=$([[ $pair == 1 ]] || echo "$pair")
  beside "readers$suffix" read
  [[ $trained == 0 ]] || { echo "FAIL: the run beside the readers failed: $(tail -3 "$WORK/readers$suffix.log")"; exit 1; }
  read_sent=$((read_sent + sent)) read_ok=$((read_ok + ok))
  beside "writers$suffix" write
  [[ $trained == 0 ]] || { echo "FAIL: the run beside the writers failed: $(tail -3 "$WORK/writers$suffix.log")"; exit 1; }
  write_sent=$((write_sent + sent)) write_ok=$((write_ok + ok))
  cat "$WORK/writers$suffix.latency" >> "$WORK/writers-all.latency"
  cat "$WORK/readers$suffix.latency" >> "$WORK/readers-all.latency"
  read -r r_med _ <<< "$(step_times "readers$suffix")"
  read -r w_med _ <<< "$(step_times "writers$suffix")"
  ratios+="$(python3 -c "print(f'{$w_med / $r_med:.2f}')") "
  [[ $PAIRS == 1 ]] || echo "pair $pair: step time median with $WRITERS readers $r_med ms, with $WRITERS writers $w_med ms"
done
sent=$write_sent ok=$write_ok

kill "$SERVER"
wait "$SERVER" 2> /dev/null
SERVER=
train quiet-after || { echo "FAIL: the last run failed: $(tail -3 "$WORK/quiet-after.log")"; exit 1; }

rows=$(sqlite3 -readonly "$DB" "SELECT count(*) FROM run_user_tags WHERE key LIKE 'load\_%' ESCAPE '\\'")
read -r q1_med q1_p95 q1_max <<< "$(step_times quiet-before)"
read -r r_med r_p95 r_max <<< "$(step_times readers)"
read -r w_med w_p95 w_max <<< "$(step_times writers)"
read -r q2_med q2_p95 q2_max <<< "$(step_times quiet-after)"
echo "writes: $sent sent by $WRITERS concurrent writers in rounds while the runs trained, $ok answered 200, $rows in the file"
latency() {  # latency NAME: "median p95 max" ms of its requests, as curl timed them
  python3 -c '
import sys
d = sorted(float(x) * 1000 for x in open(sys.argv[1]) if x.strip())
print(f"{d[len(d) // 2]:.1f} / {d[int(len(d) * 0.95)]:.1f} / {d[-1]:.1f}")' "$WORK/$1.latency"
}
echo "request time ms (median / p95 / max): reads $(latency readers-all), writes $(latency writers-all)"
echo "reads: $read_sent sent in rounds of $WRITERS, $read_ok answered 200"
echo "training pinned: ${PIN_TRAIN[*]:-no}; server and clients: ${PIN_SERVE[*]:-no}"
echo "step time ms (median / p95 / max): alone before $q1_med / $q1_p95 / $q1_max;" \
  "with $WRITERS readers $r_med / $r_p95 / $r_max; with $WRITERS writers $w_med / $w_p95 / $w_max;" \
  "alone after $q2_med / $q2_p95 / $q2_max"
echo "writers' median step over the readers', a pair at a time: ${ratios% }"
if [[ $sent == 0 || $ok != "$sent" || $rows != "$sent" || $read_ok != "$read_sent" ]]; then
  echo "FAIL: $sent writes sent, $ok answered 200, $rows in the file; $read_sent reads, $read_ok answered 200"
  exit 1
fi
echo "serve write load test passed"
