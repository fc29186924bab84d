#!/usr/bin/env bash
# Gets a checkout ready to carry to a GPU machine that has no network (docs/gpu.md): the three
# folders check.sh reads there, none of them committed (.gitignore).
#   .debs/       htm's build dependencies as Debian 12 .debs (offline-deps.sh download; kept if
#                there already: give --fresh to download them again)
#   .gpu-data/fashion-mnist/   Fashion-MNIST (HTM_FASHION_MNIST, else Debian's): its test set and
#                the first HTM_TRAIN_IMAGES (default 20000) training images, so that all of it fits
#                the 64 MiB a device run carries with the tree (the whole set is 30 MiB, the .debs
#                35). The quickstart's check draws 10,000 of them: compare it with CPU runs given
#                the same folder (dataset.root), not the whole set
#   .official/hierarchical_transformer.py   the paper's official code, which the timing harness
#                bench/official/time_official.py runs beside htm (not this project's to commit)
# Then prints the command that runs the checks there.
#
# Usage: scripts/gpu/prepare.sh [--fresh] OFFICIAL
#   OFFICIAL  the official code: its hierarchical_transformer.py, or a clone of
#             https://github.com/CognitiveComputingLab/Hierarchical-Transformers (its HEAD's file;
#             the figures so far are of commit cd62cda)
set -euo pipefail
cd "$(dirname "$0")/../.."
fresh=0
[ "${1:-}" = --fresh ] && fresh=1 && shift
official=${1:-}
die() {
  echo "prepare: $*" >&2
  exit 2
}
[ -n "$official" ] || die "usage: scripts/gpu/prepare.sh [--fresh] OFFICIAL (the official hierarchical_transformer.py, or a clone of its repository)"

# The official code: a file, a work tree, or a bare git directory (a mirror).
mkdir -p .official
if [ -f "$official" ]; then
  cp "$official" .official/hierarchical_transformer.py
elif [ -f "$official/hierarchical_transformer.py" ]; then
  cp "$official/hierarchical_transformer.py" .official/
elif git -C "$official" rev-parse --git-dir > /dev/null 2>&1 &&
  git -C "$official" show HEAD:hierarchical_transformer.py > .official/hierarchical_transformer.py 2> /dev/null; then
  git -C "$official" log -1 --format='prepare: the official code at %h (%s)' >&2
else
  die "$official is neither hierarchical_transformer.py nor a clone holding it"
fi
echo "prepare: .official/hierarchical_transformer.py, sha1 $(sha1sum .official/hierarchical_transformer.py | cut -c1-12)" >&2

fashion=${HTM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
for f in "${files[@]}"; do
  [ -f "$fashion/$f" ] || die "no $fashion/$f: set HTM_FASHION_MNIST to a Fashion-MNIST folder (or install Debian's package)"
done
mkdir -p .gpu-data/fashion-mnist
cp "$fashion/t10k-images-idx3-ubyte.gz" "$fashion/t10k-labels-idx1-ubyte.gz" .gpu-data/fashion-mnist/
# The first N training images and labels: the idx header's count set to N, the rest as it was.
python3 - "$fashion" .gpu-data/fashion-mnist "${HTM_TRAIN_IMAGES:-20000}" << 'PY'
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, item in (("train-images-idx3-ubyte.gz", 28 * 28), ("train-labels-idx1-ubyte.gz", 1)):
    data = gzip.open(f"{src}/{name}").read()
    dims = data[3]
    count = struct.unpack(">I", data[4:8])[0]
    if not 0 < n <= count:
        sys.exit(f"prepare: HTM_TRAIN_IMAGES={n}: {name} holds {count}")
    head = 4 + 4 * dims
    out = data[:4] + struct.pack(">I", n) + data[8:head] + data[head:head + n * item]
    with gzip.open(f"{dst}/{name}", "wb", compresslevel=9) as f:
        f.write(out)
print(f"prepare: .gpu-data/fashion-mnist: {n} of {count} training images, the whole test set", file=sys.stderr)
PY

if [ "$fresh" = 1 ] || [ ! -f .debs/PACKAGES ]; then
  scripts/gpu/offline-deps.sh download .debs
fi

# What a device run carries: the tree (tracked and untracked files git does not ignore) and these.
tree=$(git ls-files -z --cached --others --exclude-standard | du -cm --files0-from=- | tail -1 | cut -f1)
size=$(du -scm .debs .gpu-data .official | tail -1 | cut -f1)
echo "prepare: .debs, .gpu-data, .official: $size MiB; with the tree ($tree MiB) $((size + tree)) MiB (a device run carries 64 MiB at most)" >&2
[ $((size + tree)) -le 64 ] || echo "prepare: warning: more than 64 MiB to carry: lower HTM_TRAIN_IMAGES" >&2
cat << 'EOF'
On the GPU machine, from the checkout's root (the device tool: carry .debs, .official and .gpu-data):
  HTM_COMMIT=<this checkout's commit> HTM_DEPS=.debs HTM_OFFICIAL=bench/official/time_official.py \
    HTM_OFFICIAL_SOURCE=.official/hierarchical_transformer.py HTM_FASHION_MNIST=$PWD/.gpu-data/fashion-mnist \
    HTM_QUICK=1 JOBS=16 HTM_BUDGET=<seconds> scripts/gpu/check.sh $OUT/check
EOF
