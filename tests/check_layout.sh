#!/usr/bin/env bash
# The shape of the source tree, checked: no source file over 500 lines; no host setting looked
# up by its name outside core/src/config (settings are typed, see config/settings.h); and the
# core's folders include each other one way only (docs/architecture.md).
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

declare -A allowed=(
  [sdk]="sdk"
  [config]="config"
  [store]="store"
  [model]="model sdk"
  [hierarchy]="hierarchy store"
  [report]="report hierarchy"
  [dist]="dist"
  [stats]="stats"
  [train]="train model config store hierarchy report dist"
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
[ $status -eq 0 ] && echo "layout ok: files under 500 lines, typed host settings, one-way includes"
exit $status
