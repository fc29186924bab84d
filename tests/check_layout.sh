#!/usr/bin/env bash
# The shape of the source tree, checked: no source file over 500 lines; no host setting looked
# up by its name outside core/src/config (settings are typed, see config/settings.h); and the
# core's folders include each other one way only (docs/architecture.md); no tensor put on the
# CPU outside the native kernels and I/O without a reason.
set -uo pipefail
cd "$1"
status=0

long=$(find core registry plugins tests docs/examples -name '*.cpp' -o -name '*.h' | xargs wc -l |
       awk '$2 != "total" && $1 > 500 { print "  " $2 " (" $1 " lines)" }')
if [ -n "$long" ]; then echo "files over 500 lines:"; echo "$long"; status=1; fi

key='"(experiment|model|train|estimator|runtime)\.[a-z_0-9]+"'
lookups=$(grep -rnE "(\($key\)|\[$key\])" core registry plugins tests --include='*.cpp' --include='*.h' |
          grep -vE '^(core/src/config/|tests/config_test.cpp:|tests/settings_test.cpp:)')
if [ -n "$lookups" ]; then echo "host settings looked up by name outside core/src/config:"; echo "$lookups"; status=1; fi

# runtime.device: tensors live where the run says. Outside the native CPU kernels and the I/O
# (pictures, the results store), a line that puts a tensor on the CPU says why, with "// host:".
device=$(grep -rnE 'kCPU\b|\.cpu\(\)' core registry plugins --include='*.cpp' --include='*.h' |
         grep -vE '^core/src/(kernels/native|report|store)/|// host:')
if [ -n "$device" ]; then echo "device assumptions (torch::kCPU, .cpu()) without a // host: reason:"; echo "$device"; status=1; fi

declare -A allowed=(
  [sdk]="sdk kernels"
  [kernels]="kernels"
  [board]="board kernels"
  [config]="config"
  [store]="store"
  [model]="model board kernels"
  [hierarchy]="hierarchy store"
  [report]="report hierarchy"
  [dist]="dist board"
  [stats]="stats"
  [study]="study stats store config"
  [train]="train model config store hierarchy report dist kernels board"
)
for folder in "${!allowed[@]}"; do
  while IFS= read -r line; do
    [ -z "$line" ] && continue
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<< "$line")
    [ "$target" = htm ] && continue
    if [[ " ${allowed[$folder]} " != *" $target "* ]]; then
      echo "core/src/$folder may not include $target/: $line"; status=1
    fi
  done < <(grep -rnE '#include "[a-z_]+/' "core/src/$folder")
done
# registry/ reads config (the catalog it implements, the search path) and board/run_board.h.
while IFS= read -r line; do
  [ -z "$line" ] && continue
  target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<< "$line")
  case "$target" in htm|config) ;; board) [[ "$line" == *'"board/run_board.h"'* ]] || { echo "registry/ may read only board/run_board.h of board/: $line"; status=1; } ;;
    *) echo "registry/ may not include $target/: $line"; status=1 ;; esac
done < <(grep -rnE '#include "[a-z_]+/' registry)

# app/ (the htm command) and registry/ sit on top: nothing under core/src includes their headers.
# app/'s rooms (commands/, web/, process/) include their headers by room ("web/serve.h").
found=$(grep -rnE '#include "(commands|web|process)/' core/src)
if [ -n "$found" ]; then echo "core/src may not include app/'s headers:"; echo "$found"; status=1; fi
for header in $(cd registry && ls *.h); do
  found=$(grep -rnF "#include \"$header\"" core/src)
  if [ -n "$found" ]; then echo "core/src may not include $header (registry/):"; echo "$found"; status=1; fi
done
# Of app/'s rooms, commands/ reads web/ and process/; web/ and process/ read neither commands/ nor each other.
found=$(grep -rnE '#include "(commands|process)/' core/app/web; grep -rnE '#include "(commands|web)/' core/app/process)
if [ -n "$found" ]; then echo "web/ and process/ may not include commands/ or each other:"; echo "$found"; status=1; fi
bare=$(grep -rnE '#include "[a-z_]+\.h"' core/app | grep -vE '"(registry|file_checks)\.h"')
if [ -n "$bare" ]; then echo "app/ includes its headers by room (\"process/launch.h\"):"; echo "$bare"; status=1; fi
# docs/architecture.md's source map names every file of the core and the registry (as name.cpp,
# name.h or name.*), so a new file cannot go unmentioned.
# The names the map holds, read once (a grep a file cost seconds).
declare -A named=()
while IFS= read -r stem; do named[$stem]=1; done < <(sed -n '/^## Source map/,/^## /p' docs/architecture.md |
  grep -oE '(^|[^a-z_])[a-z_0-9]+\.(\*|h|cpp)' | sed -E 's/^[^a-z_0-9]//; s/\.(\*|h|cpp)$//' | sort -u)
unnamed=""
for f in core/include/htm/*.h $(find core/src core/app -name "*.cpp" -o -name "*.h") registry/*.cpp registry/*.h; do
  stem=$(basename "$f"); stem=${stem%.*}
  [ -n "${named[$stem]:-}" ] || unnamed+="  $f"$'\n'
done
if [ -n "$unnamed" ]; then echo "files docs/architecture.md's source map does not name:"; printf '%s' "$unnamed"; status=1; fi
[ $status -eq 0 ] && echo "layout ok: files under 500 lines, typed host settings, one-way includes (core/src, app/, registry/), a source map naming every file, device assumptions with a reason"
exit $status
