#!/usr/bin/env bash
# The SDK as an outsider sees it, the path docs/writing-a-plugin.md walks a newcomer through:
# build docs/examples/cosine_policy with find_package(htm) straight against the build tree,
# see `htm plugins` list it, run the conformance suite on it with `htm check-plugin`; then the
# same build against an installed SDK.
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
example="$source/docs/examples/cosine_policy"
# Release at -O1: what this checks does not hang on the optimisation level, and each of its two
# compiles of a libtorch file is quicker.
release=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")

cmake -S "$example" -B "$work/plugin" -DCMAKE_PREFIX_PATH="$build" "${release[@]}" > "$work/configure.log"
cmake --build "$work/plugin" -j2 > "$work/build.log"
HTM_PLUGIN_PATH="$work/plugin/plugins" "$build/htm" plugins | grep -E "^policy +cosine +1\.0\.0"
"$build/htm" check-plugin "$work/plugin/plugins/htm_policy_cosine.so" > "$work/check.log" \
  || { cat "$work/check.log"; exit 1; }
grep -E "^\[  PASSED  \] [0-9]+ tests" "$work/check.log"
grep -q "PolicyConformance.*cosine" "$work/check.log"

cmake --install "$build" --prefix "$work/sdk" > "$work/install.log"
cmake -S "$example" -B "$work/installed" -DCMAKE_PREFIX_PATH="$work/sdk" "${release[@]}" > "$work/configure2.log"
cmake --build "$work/installed" -j2 > "$work/build2.log"
"$work/sdk/bin/htm-conformance" "$work/installed/plugins/htm_policy_cosine.so" --gtest_brief=1 | tail -1
