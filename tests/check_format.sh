#!/usr/bin/env bash
# Every C++ file of the project, and the web pages' scripts, in .clang-format's style
# (clang-format 14, Debian's). Prints the files that are not, with the first lines clang-format
# would change, and the command that fixes them. The pages' other assets (HTML, CSS) keep to the
# same 120 columns, and each script parses (node --check, where node is installed).
set -uo pipefail
cd "$1"
command -v clang-format > /dev/null || { echo "clang-format is not installed (scripts/install-deps.sh installs it)"; exit 1; }
files=$( (find core registry plugins tests docs/examples bench -name '*.cpp' -o -name '*.h'; find core/app/web/assets -name '*.js') 2> /dev/null | sort)
# One clang-format for every file (a process a file costs 30 s here, one for all 2 s); its
# warnings name the files that are not in style.
bad=()
if ! warnings=$(clang-format --dry-run --Werror $files 2>&1 > /dev/null); then
  mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' <<< "$warnings" | cut -d: -f1 | sort -u)
  [ ${#bad[@]} -gt 0 ] || { echo "$warnings"; exit 1; }
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "not in .clang-format's style (${#bad[@]} file(s)):"
  for f in "${bad[@]}"; do
    echo "  $f"
    clang-format --dry-run "$f" 2>&1 | head -4 | sed 's/^/      /'
  done
  echo "fix: clang-format -i ${bad[*]}"
  exit 1
fi
long=$(awk 'length > 120 { print "  " FILENAME ":" FNR " (" length " columns)" }' core/app/web/assets/*)
if [ -n "$long" ]; then echo "web assets over 120 columns:"; echo "$long"; exit 1; fi
if command -v node > /dev/null; then
  for f in core/app/web/assets/*.js; do
    node --check "$f" || { echo "$f: not a script node can parse"; exit 1; }
  done
fi
echo "format ok: $(wc -w <<< "$files") files in .clang-format's style"
