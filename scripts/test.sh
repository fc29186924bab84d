#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run every test; then
# build again without the native CPU kernels (the portable ones alone, as on a GPU machine:
# docs/gpu.md) and run the unit tests there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${HTM_TEST_JOBS:-2}"
scripts/build.sh build-portable -DHTM_NATIVE_KERNELS=OFF
ctest --test-dir build-portable --output-on-failure -j "${HTM_TEST_JOBS:-2}" -L unit
