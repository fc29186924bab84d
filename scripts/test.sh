#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run every test.
# The portable and gpu kernels are tested inside this build (runtime.kernels; GoldenModel pins
# both). HTM_TEST_PORTABLE_BUILD=1 also builds without the native CPU kernels, as a GPU machine
# does (docs/gpu.md), and runs the unit tests there: a second whole build (~15 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${HTM_TEST_JOBS:-2}"
if [ "${HTM_TEST_PORTABLE_BUILD:-0}" = 1 ]; then
  scripts/build.sh build-portable -DHTM_NATIVE_KERNELS=OFF
  ctest --test-dir build-portable --output-on-failure -j "${HTM_TEST_JOBS:-2}" -L unit
fi
