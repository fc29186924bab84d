#!/bin/bash
# htm's paper-size training step in fp32 and in bf16 against the PyTorch reference port,
# interleaved three times at 1 thread and then at 2, so that the machine's drift hits all three
# alike (docs/performance.md). Needs a build (scripts/build.sh) and Debian's python3-torch.
# Usage: bench/reference/side_by_side.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-3}
for threads in 1 2; do
  for ((i = 1; i <= repeats; i++)); do
    ./build/htm bench --threads "$threads" --steps 10 --step-only | grep -E "^(summary|memory)"
    ./build/htm bench --threads "$threads" --steps 10 --step-only --set runtime.precision=bf16 | grep -E "^(summary|memory)"
    python3 bench/reference/reference.py --threads "$threads" --steps 8 | grep -E "^reference"
  done
done
