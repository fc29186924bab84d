#!/usr/bin/env bash
# The golden digests (tests/golden_test.cpp), checked or rewritten for this CPU and, where it has
# AVX-512, for an AVX2 one as well: capped by ATEN_CPU_CAPABILITY=avx2 (torch's kernels and
# htm's own), ONEDNN_MAX_CPU_ISA=AVX2 and OPENBLAS_CORETYPE=Haswell, an AVX-512 CPU computes
# the AVX2 digests bit for bit (checked against ones pinned on an AVX2-only EPYC).
#   scripts/golden.sh           check both
#   scripts/golden.sh --write   rewrite both (a change that moves the numbers on purpose)
set -euo pipefail
cd "$(dirname "$0")/.."
tests=${HTM_TESTS:-build/tests/htm_tests}
[[ -x $tests ]] || { echo "error: $tests: not built (scripts/build.sh)" >&2; exit 1; }
write=()
case "${1:-}" in
  "") ;;
  --write) write=(env HTM_GOLDEN_WRITE=1) ;;
  *) echo "error: unknown option '$1' (expected --write or nothing)" >&2; exit 2 ;;
esac
run() { "${write[@]}" "$@" "$tests" --gtest_filter='GoldenModel.*' --gtest_brief=1; }
echo "== this CPU"
run env
if grep -qw avx512f /proc/cpuinfo; then
  echo "== as an AVX2 CPU"
  run env ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell
fi
