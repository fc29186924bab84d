#!/usr/bin/env bash
# Installs the SDK into a scratch prefix, builds docs/examples/cosine_policy against it with
# find_package(htm), and checks that `htm plugins` lists the new policy: the path
# docs/writing-a-plugin.md walks a newcomer through.
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/sdk" > "$work/install.log"
cmake -S "$source/docs/examples/cosine_policy" -B "$work/plugin" \
  -DCMAKE_PREFIX_PATH="$work/sdk" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log"
cmake --build "$work/plugin" -j2 > "$work/build.log"
HTM_PLUGIN_PATH="$work/plugin/plugins" "$build/htm" plugins | grep -E "^policy +cosine +1\.0\.0"
