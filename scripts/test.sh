#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${HTM_TEST_JOBS:-2}"
