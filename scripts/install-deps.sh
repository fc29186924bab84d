#!/usr/bin/env bash
# Installs every dependency of htm from Debian 12's archive. Idempotent; uses sudo when not root.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

pkgs=(
  build-essential cmake pkg-config git
  clang-format                       # the format check (tests/check_format.sh, ctest format.check)
  libtorch-dev                       # libtorch 1.13 (CPU)
  libopenblas0-openmp                # fast BLAS for libtorch (reference BLAS is ~20x slower)
  libboost-dev libboost-program-options-dev   # Boost.DLL (header-only) + Program_options
  libtomlplusplus-dev                # TOML++
  libsqlite3-dev sqlite3             # results store
  libgtest-dev libgmock-dev          # GoogleTest (the tests link GTest::gmock too)
  libcairo2-dev zlib1g-dev           # PNG pictures (cairo), gzip IDX files (zlib)
  libarmadillo-dev                   # Gaussian mixtures (gmm_full) for generation
  dataset-fashion-mnist              # the default real dataset
  libjs-chart.js                     # charts inlined into `htm report` pages
  libcpp-httplib-dev                 # the HTTP server of `htm serve`
  python3                            # htm serve's database maker and load test (scripts/serve)
  python3-torch                      # the Python route: policies scripted in PyTorch (the same 1.13 as libtorch-dev)
  python3-pandas python3-matplotlib  # results as DataFrames (python/htm_results) and the notebook's plots
  python3-nbclient python3-nbformat python3-ipykernel  # the notebook docs/examples/results.ipynb, executed by the tests
  libgloo-dev                        # Gloo headers for data-parallel training (libtorch's c10d)
  slurm-wlm munge                    # the Slurm sweep test starts a real one-node cluster (tests/slurm)
  chromium                           # the report's browser test (headless)
  nodejs                             # the click tests of htm serve (tests/browser: puppeteer-core)
)
# --list: the names alone, installing nothing (scripts/torch2-check.sh installs them in a chroot).
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi
# npm: Debian's package, unless another nodejs (NodeSource's bundles npm and conflicts with it) has one.
command -v npm > /dev/null || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Make sure libtorch's libblas.so.3 resolves to OpenBLAS (OpenMP flavour), not the reference BLAS.
blas=$(ls /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 2>/dev/null || true)
if [ -n "$blas" ]; then
  $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null
  lapack=/usr/lib/x86_64-linux-gnu/openblas-openmp/liblapack.so.3
  [ -e "$lapack" ] && $SUDO update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack" >/dev/null || true
fi
# The click tests' one npm package (puppeteer-core, pinned in tests/browser/package-lock.json; it
# drives the chromium above and downloads no browser), into tests/browser/node_modules (git-ignored).
# Skipped when that lock file is what was installed last.
browser_tests=$(cd "$(dirname "$0")/../tests/browser" && pwd)
if ! cmp -s "$browser_tests/package-lock.json" "$browser_tests/node_modules/.htm-installed-lock.json"; then
  echo "install-deps: npm ci in $browser_tests"
  (cd "$browser_tests" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  cp "$browser_tests/package-lock.json" "$browser_tests/node_modules/.htm-installed-lock.json"
fi
echo "install-deps: ok (BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3))"
