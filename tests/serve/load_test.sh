#!/usr/bin/env bash
# htm serve under load (ctest label `integration`): a 10,000-run database made by
# scripts/serve/make_db.py (few metric points a run, so that it builds in seconds), 50 clients
# for 30 s on loopback while a writer keeps adding a running run's metrics. Passes when no
# request fails and no write fails; prints the latencies (docs/serve.md has the full-size figures).
#   usage: load_test.sh HTM_BINARY SOURCE_DIR [CLIENTS SECONDS]
source "$(dirname "$0")/serve_base.sh"
set -uo pipefail
HTM=$(realpath "$1")
SRC=$(realpath "$2")
CLIENTS=${3:-50}
SECONDS_=${4:-30}
WORK=$(mktemp -d /tmp/htm-serve-load.XXXXXX)
cleanup() {
  [[ -n ${SERVER:-} ]] && kill "$SERVER" 2> /dev/null
  wait 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
PYTHON=$(command -v /usr/bin/python3 || command -v python3)
"$PYTHON" "$SRC/scripts/serve/make_db.py" "$HTM" "$WORK/big.sqlite" --runs 10000 --points 3 --running 1 || exit 1
"$HTM" serve --db "$WORK/big.sqlite" --port 0 > "$WORK/serve.log" 2>&1 &
SERVER=$!
BASE=$(serve_base "$WORK/serve.log") || { echo "FAIL: htm serve did not start: $(cat "$WORK/serve.log")"; exit 1; }
if "$PYTHON" "$SRC/scripts/serve/load.py" "$BASE" --clients "$CLIENTS" --seconds "$SECONDS_" \
  --writer "$WORK/big.sqlite"; then
  echo "serve load test passed"
else
  echo "FAIL: requests or writes failed under load"
  exit 1
fi
