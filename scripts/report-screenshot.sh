#!/usr/bin/env bash
# A PNG of a report page as a browser draws it (headless Chromium), for docs/report.md.
#   usage: scripts/report-screenshot.sh REPORT.html OUT.png [WIDTH HEIGHT]
set -euo pipefail
page=$(realpath "$1")
out=$(realpath -m "$2")
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --disable-dev-shm-usage \
  --window-size="${3:-1100},${4:-1500}" --virtual-time-budget=10000 --screenshot="$out" "file://$page" 2> /dev/null
echo "$out"
