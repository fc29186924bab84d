#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, train the quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/htm run experiments/quickstart.toml "$@"
