#!/usr/bin/env bash
# Configures and builds htm into build/ (Release, 2 parallel jobs: libtorch TUs are heavy).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
rm -f build-configure.log
cmake --build build -j "${HTM_BUILD_JOBS:-2}"
