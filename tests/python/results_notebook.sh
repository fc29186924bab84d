#!/usr/bin/env bash
# ctest python.notebook: docs/examples/results.ipynb executed by nbclient on the study of
# results_study.sh, with a python3 that has pandas, matplotlib and nbclient (exit 77, skipped,
# where none has). Usage: results_notebook.sh HTM SOURCE_DIR DB
set -u
htm=$1 src=$2 db=$3
for candidate in ${HTM_PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c 'import pandas, matplotlib, nbclient, nbformat, ipykernel' 2> /dev/null; then
    HTM_DB=$db HTM_EXPERIMENT=python-results HTM=$htm PYTHONPATH="$src/python" PYDEVD_DISABLE_FILE_VALIDATION=1 \
      exec "$candidate" "$src/tests/python/results_notebook.py" "$src/docs/examples/results.ipynb"
  fi
done
echo "skipped: no python3 with pandas, matplotlib, nbclient, nbformat and ipykernel" \
  "(Debian: apt-get install python3-pandas python3-matplotlib python3-nbclient python3-ipykernel)"
exit 77
