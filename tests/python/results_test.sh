#!/usr/bin/env bash
# ctest python.results: results_check.py with a python3 that has pandas (exit 77, skipped, where
# none has). Usage: results_test.sh HTM SOURCE_DIR DB
set -u
htm=$1 src=$2 db=$3
for candidate in ${HTM_PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c 'import pandas' 2> /dev/null; then
    PYTHONPATH="$src/python" exec "$candidate" "$src/tests/python/results_check.py" "$htm" "$db"
  fi
done
echo "skipped: no python3 with pandas (Debian: apt-get install python3-pandas)"
exit 77
