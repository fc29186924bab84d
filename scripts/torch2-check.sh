#!/usr/bin/env bash
# Builds and tests htm against a 2.x torch on a machine without one: Debian 13's own packages
# (libtorch 2.6 CPU, g++ 14, cpp-httplib 0.18, oneDNN 3.7) in a chroot, the nearest a Debian 12
# machine gets to a GPU machine's torch before a lease (docs/gpu.md). Needs root and Debian's
# archive. The chroot and its builds are kept: a second call builds only what changed.
# Usage: sudo scripts/torch2-check.sh [CHROOT] [LABEL_REGEX]
#   CHROOT       default /tmp/htm-trixie
#   LABEL_REGEX  the ctest labels to run (default unit; "unit|integration" runs everything but
#                the browser, Slurm and format checks, which need packages not installed there)
# Both configurations are built in the chroot's /src/htm: build (no native kernels, as a GPU
# machine builds; its unit tests) and build-native (the default; LABEL_REGEX's tests). Prints each
# one's ctest summary and failures; exits non-zero if either failed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/tmp/htm-trixie}
labels=${2:-unit}
[ "$(id -u)" -eq 0 ] || { echo "torch2-check: needs root (debootstrap, chroot)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive

if [ ! -f "$root/etc/debian_version" ]; then
  command -v debootstrap > /dev/null || apt-get install -y -qq debootstrap
  echo "torch2-check: debootstrap trixie into $root"
  debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian > "$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log"; exit 1; }
fi
mounted=()
for d in proc sys dev dev/pts; do
  if ! mountpoint -q "$root/$d"; then
    mount --bind "/$d" "$root/$d"
    mounted=("$root/$d" "${mounted[@]}")
  fi
done
trap 'for m in "${mounted[@]}"; do umount "$m" || true; done' EXIT
cp /etc/resolv.conf "$root/etc/"

# install-deps.sh's packages (the names are Debian 13's too), but the format, browser and Slurm
# checks' tools, whose tests are left out below.
pkgs=$("$repo/scripts/install-deps.sh" --list | grep -vxE 'clang-format|chromium|nodejs|slurm-wlm|munge' | tr '\n' ' ')
chroot "$root" bash -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs > /dev/null"

# The repository's HEAD (committed work only), cloned or brought up to date in the chroot.
src="$root/src/htm"
[ -d "$src/.git" ] || git clone -q "$repo" "$src"
git -C "$src" fetch -q "$repo" HEAD
git -C "$src" reset -q --hard FETCH_HEAD
echo "torch2-check: $(git -C "$src" log --oneline -1 | cut -c1-72)"
echo "torch2-check: $(chroot "$root" dpkg-query -W -f='libtorch ${Version}' libtorch-dev), $(chroot "$root" g++ --version | head -1)"

status=0
for config in "build OFF unit" "build-native ON $labels"; do
  read -r dir native run <<< "$config"
  if ! chroot "$root" bash -c "cd /src/htm && cmake -S . -B $dir -DCMAKE_BUILD_TYPE=Release -DHTM_NATIVE_KERNELS=$native > /src/$dir.log 2>&1 &&
      cmake --build $dir -j2 >> /src/$dir.log 2>&1"; then
    echo "torch2-check: $dir: build failed (log: $root/src/$dir.log)"
    grep -m3 -A8 " error" "$root/src/$dir.log" || tail -20 "$root/src/$dir.log"
    status=1
    continue
  fi
  if chroot "$root" bash -c "cd /src/htm && ctest --test-dir $dir -L '$run' -j2 -E 'format\.check|browser|slurm' \
      --timeout 900 --output-on-failure > /src/$dir.tests.log 2>&1"; then
    :
  else
    status=1
  fi
  echo "torch2-check: $dir: $(grep -E 'tests passed' "$root/src/$dir.tests.log")"
  grep -E '\*\*\*(Failed|Timeout)' "$root/src/$dir.tests.log" | sed 's/^/  /' || true
done
exit $status
