#!/usr/bin/env bash
# Every C++ file of the project in .clang-format's style (clang-format 14, Debian's). Prints the
# files that are not, with the first lines clang-format would change, and the command that fixes
# them.
set -uo pipefail
cd "$1"
command -v clang-format > /dev/null || { echo "clang-format is not installed (scripts/install-deps.sh installs it)"; exit 1; }
files=$(find core registry plugins tests docs/examples bench -name '*.cpp' -o -name '*.h' 2> /dev/null | sort)
bad=()
for f in $files; do
  clang-format --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not in .clang-format's style (${#bad[@]} file(s)):"
  for f in "${bad[@]}"; do
    echo "  $f"
    clang-format --dry-run "$f" 2>&1 | head -4 | sed 's/^/      /'
  done
  echo "fix: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format ok: $(wc -w <<< "$files") files in .clang-format's style"
