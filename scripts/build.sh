#!/usr/bin/env bash
# Configures and builds htm (Release, 2 parallel jobs: libtorch TUs are heavy).
# Usage: scripts/build.sh [BUILD_DIR [CMAKE_ARGS...]]   (default: build/)
#   scripts/build.sh build-portable -DHTM_NATIVE_KERNELS=OFF   # the portable kernels alone
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift $(($# > 0 ? 1 : 0))
log=build-configure.log
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
cmake --build "$dir" -j "${HTM_BUILD_JOBS:-2}"
