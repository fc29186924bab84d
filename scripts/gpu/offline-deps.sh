#!/usr/bin/env bash
# htm's build and run dependencies, except libtorch and the C/C++ toolchain, carried as Debian 12
# .debs to a build machine without a package manager or network (e.g. an air-gapped GPU node
# with a pip-installed torch) and unpacked there into a private prefix, never into /.
#
#   On Debian 12 (apt, no root needed):  scripts/gpu/offline-deps.sh download DIR
#   On the build machine:                eval "$(scripts/gpu/offline-deps.sh unpack DIR PREFIX)"
#                                        scripts/gpu/offline-deps.sh check PREFIX
#
# unpack prints export lines (CMAKE_PREFIX_PATH, PKG_CONFIG_PATH, CPATH, LIBRARY_PATH,
# LD_LIBRARY_PATH, FONTCONFIG_FILE, PATH) that CMake, pkg-config, g++ and the loader follow.
# A runtime library the machine already has (ldconfig -p) is used from the machine, so the
# prefix does not shadow newer copies for other programs; OFFLINE_DEPS_PREFER_SYSTEM=0 keeps all.
set -euo pipefail

# What htm includes or links, plus what their .pc/CMake files and shared objects need.
SEEDS=(
  libboost1.74-dev libboost-program-options1.74-dev   # Boost.DLL, Boost.Math (headers), program_options
  libtomlplusplus-dev libsqlite3-dev zlib1g-dev
  libgtest-dev libgmock-dev                           # static libs + cmake/GTest (tests use GTest::gmock)
  libcairo2-dev libcairo2                             # cairo.pc's Requires.private chain comes with it
  libarmadillo-dev libarmadillo11 libsuperlu-dev      # wrapper library: FindArmadillo needs no HDF5
  libgloo-dev                                         # headers only: pip torch carries Gloo inside libtorch_cpu
  libcpp-httplib-dev libssl-dev libbrotli-dev         # htm serve (cpp-httplib.pc requires openssl, brotli)
  libjs-chart.js                                      # read at run time by `htm report`
  fontconfig-config fonts-dejavu-core                 # cairo draws text in the pictures
  pkgconf                                             # pkg-config, for a machine without one
)
# Never fetched nor followed: the toolchain, libc and what any glibc-2.39 Ubuntu has; subtrees that
# only serve parts of a -dev package htm does not use (HDF5, gobject/script cairo, ibverbs, glib tools).
PRUNE='^(libc6|libc6-dev|libc-dev-bin|libc-bin|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl-dev|libnsl2'
PRUNE+='|libtirpc.*|rpcsvc-proto'
PRUNE+='|libstdc\+\+6|libstdc\+\+-[0-9]+-dev|libgcc-s1|libgcc-[0-9]+-dev|gcc|gcc-[0-9]+|gcc-[0-9]+-base|g\+\+.*'
PRUNE+='|cpp.*|libgomp1'
PRUNE+='|zlib1g|liblzma5|libzstd1|libbz2-1\.0|libselinux1|libpcre2-8-0|libuuid1|libtinfo6|libffi8'
PRUNE+='|debconf|cdebconf|dpkg|perl-base|perl|python3.*|libpython3.*|googletest|pkg-config'
PRUNE+='|libcairo-gobject2|libcairo-script-interpreter2|libsm-dev|libice-dev'
PRUNE+='|libglib2\.0-0|libglib2\.0-bin|libglib2\.0-dev-bin|libmount-dev|libselinux1-dev|libblkid-dev'
PRUNE+='|libsepol-dev'
PRUNE+='|libpcre2-16-0|libpcre2-32-0|libpcre2-posix3'
PRUNE+='|libarpack2-dev|libhdf5-dev|libopenblas-dev|libblas-dev|libatlas-base-dev|libgloo0|libhiredis-dev'
PRUNE+='|libibverbs-dev)$'
# A library the checks accept from the machine: every glibc-2.39 Ubuntu with g++ has these.
BASE_LIBS='^(libc|libm|libstdc\+\+|libgcc_s|libz|libpthread|libdl|librt|ld-linux-x86-64|libgomp)\.so'
ARCH=x86_64-linux-gnu

die() { echo "offline-deps: $*" >&2; exit 1; }

# The direct dependencies apt would install for these packages: first choice of each
# alternative, first provider of a virtual package (one apt-cache call for many packages).
deps_of() {
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$@" | awk '
    /^ *\|?(Pre)?Depends:/ {
      alt = ($0 ~ /^ *\|/); name = $2
      if (!done) { if (name ~ /^</) pending = 1; else print name; done = 1 }
      if (!alt) done = 0
      next }
    /^    [^ ]/ { if (pending) { print $1; pending = 0 } }
    /^[^ ]/ { done = 0; pending = 0 }'
}

closure() {  # breadth first, one apt-cache call per level
  local -A seen=()
  local level=("${SEEDS[@]}") next p
  while [ "${#level[@]}" -gt 0 ]; do
    next=()
    for p in "${level[@]}"; do
      p=${p%:amd64}
      [[ -n ${seen[$p]:-} || $p =~ $PRUNE ]] && continue
      seen[$p]=1; next+=("$p")
    done
    [ "${#next[@]}" -gt 0 ] || break
    mapfile -t level < <(deps_of "${next[@]}" | sort -u)
  done
  printf '%s\n' "${!seen[@]}" | sort
}

cmd_download() {
  local dir=${1:?usage: offline-deps.sh download DIR}
  command -v apt-get >/dev/null || die "download needs apt (a Debian 12 machine)"
  grep -q 'VERSION_ID="12"' /etc/os-release 2>/dev/null || echo "offline-deps: warning: not Debian 12" >&2
  mkdir -p "$dir"; rm -f "$dir"/*.deb  # no stale versions for unpack to pick up
  local pkgs; mapfile -t pkgs < <(closure)
  echo "offline-deps: ${#pkgs[@]} packages: ${pkgs[*]}" >&2
  (cd "$dir" && apt-get download -q "${pkgs[@]}" >&2)
  printf '%s\n' "${pkgs[@]}" >"$dir/PACKAGES"
  echo "offline-deps: $(find "$dir" -maxdepth 1 -name '*.deb' | wc -l) .debs, $(du -sh "$dir" | cut -f1) in $dir" >&2
}

# The machine's own copy of a soname, from the loader cache (none: empty).
system_lib() {
  { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } |
    awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }'
}

cmd_unpack() {
  local dir=${1:?usage: offline-deps.sh unpack DIR PREFIX} prefix=${2:?usage: offline-deps.sh unpack DIR PREFIX}
  command -v dpkg >/dev/null || command -v dpkg-deb >/dev/null || command -v ar >/dev/null ||
    die "unpack needs dpkg or ar (binutils)"
  # A fresh prefix each time: one made here before is made again, anything else is refused.
  if [ -d "$prefix" ] && [ -n "$(ls -A "$prefix")" ]; then
    [ -e "$prefix/.offline-deps" ] || die "$prefix is not empty and was not made by offline-deps"
    rm -rf "${prefix:?}"
  fi
  mkdir -p "$prefix"; prefix=$(cd "$prefix" && pwd); touch "$prefix/.offline-deps"
  local deb count=0; dir=$(cd "$dir" && pwd)
  for deb in "$dir"/*.deb; do
    [ -e "$deb" ] || die "no .deb in $dir"
    if command -v dpkg >/dev/null; then dpkg -x "$deb" "$prefix"
    else  # no dpkg: a .deb is an ar archive holding data.tar.*
      local tmp; tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix")
      rm -rf "$tmp"
    fi
    count=$((count + 1))
  done
  local usr=$prefix/usr lib=$prefix/usr/lib/$ARCH link target d
  # Merged /usr, as on the machines these packages were built for (libexpat1 ships /lib/...).
  for d in lib bin sbin; do
    if [ -d "$prefix/$d" ] && [ ! -L "$prefix/$d" ]; then
      mkdir -p "$usr/$d" && cp -a "$prefix/$d/." "$usr/$d/" && rm -rf "${prefix:?}/$d"
    fi
    [ -e "$prefix/$d" ] || ln -s "usr/$d" "$prefix/$d"
  done
  # Absolute symlinks (/usr/..., /etc/...) point into the prefix.
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    case $target in /*) ln -sfn "$prefix$target" "$link" ;; esac
  done < <(find "$prefix" -type l -print0)
  # The BLAS/LAPACK sonames live in alternatives folders that postinst would link: link them here.
  for target in "$lib"/blas/lib*.so.* "$lib"/lapack/lib*.so.*; do
    [ -e "$target" ] && [ ! -e "$lib/$(basename "$target")" ] && ln -s "$target" "$lib/$(basename "$target")"
  done
  # pkg-config files: every absolute /usr becomes the prefix's.
  find "$prefix" -name '*.pc' -path '*/pkgconfig/*' -type f -print0 |
    xargs -0 -r sed -i -E "s#^([A-Za-z_]+)=/usr#\\1=$usr#; s#([ =])-([IL])/usr/#\\1-\\2$usr/#g"
  # Armadillo's config.hpp names SuperLU's header folder by its absolute path.
  [ -f "$usr/include/armadillo_bits/config.hpp" ] &&
    sed -i "s#^\\(\#define ARMA_SUPERLU_INCLUDE_DIR \\)/usr/#\\1$usr/#" "$usr/include/armadillo_bits/config.hpp"
  # fontconfig: the prefix's fonts and config snippets besides the machine's own.
  local fc=$prefix/etc/fonts/fonts.conf
  if [ -f "$fc" ] && ! grep -q "$usr/share/fonts" "$fc"; then
    local include_from='<include ignore_missing="yes">conf.d</include>'
    local include_to="<include ignore_missing=\"yes\">$prefix/etc/fonts/conf.d</include>"
    sed -i -e "s#<dir>/usr/share/fonts</dir>#<dir>/usr/share/fonts</dir>\\n\\t<dir>$usr/share/fonts</dir>#" \
      -e "s#$include_from#$include_to#" "$fc"
  fi
  # A runtime library the machine already has is taken from the machine (moved to .shadowed/).
  local moved=0 soname sys f n
  if [ "${OFFLINE_DEPS_PREFER_SYSTEM:-1}" = 1 ]; then
    mkdir -p "$prefix/.shadowed"
    for f in "$lib"/lib*.so.* "$usr"/lib/lib*.so.*; do
      [ -e "$f" ] || continue
      soname=$(basename "$f"); [[ $soname =~ \.so\.[0-9]+$ ]] || continue
      sys=$(system_lib "$soname"); [ -n "$sys" ] || continue
      case $sys in "$prefix"/*) continue ;; esac
      local stem=${soname%%.so.*}; d=$(dirname "$f")
      mv "$d/$stem".so.* "$prefix/.shadowed/" 2>/dev/null || true
      moved=$((moved + 1))
    done
  fi
  # A link-time name (libz.so) whose library is not in the prefix points to the machine's copy,
  # or goes: left dangling, CMake and ld would take the static libz.a beside it.
  for f in "$lib"/lib*.so "$usr"/lib/lib*.so; do
    if [ ! -L "$f" ] || [ -e "$f" ]; then continue; fi
    n=$(basename "$(readlink "$f")") sys=""  # libz.so.1.2.13, then libz.so.1.2, libz.so.1
    while [ -z "$sys" ] && [[ $n == *.so.* ]]; do sys=$(system_lib "$n"); n=${n%.*}; done
    if [ -n "$sys" ]; then ln -sfn "$sys" "$f"; else rm -f "$f"; fi
  done
  echo "offline-deps: $count packages unpacked into $prefix; $moved libraries taken from this machine instead" >&2
  local libs="$lib:$usr/lib"
  cat <<EOF
export CMAKE_PREFIX_PATH="$usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$lib/pkgconfig:$usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
export CPATH="\${CPATH:+\$CPATH:}$usr/include"
export LIBRARY_PATH="$libs\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export FONTCONFIG_FILE="$prefix/etc/fonts/fonts.conf"
export PATH="\$PATH:$usr/bin"
export HTM_CHART_JS="$usr/share/javascript/chart.js/chart.min.js"  # htm report and serve (default: /usr/share/...)
EOF
}

# The prefix is complete: cairo's and cpp-httplib's pkg-config chains from the prefix alone, the headers htm
# includes, and every NEEDED of every shared object in the prefix, the prefix or the machine.
cmd_check() {
  local prefix=${1:?usage: offline-deps.sh check PREFIX}; prefix=$(cd "$prefix" && pwd)
  local usr=$prefix/usr lib=$prefix/usr/lib/$ARCH bad=0 h f needed pc
  pc=$(command -v pkg-config || echo "$usr/bin/pkg-config")
  for m in cairo cpp-httplib; do
    if PKG_CONFIG_LIBDIR="$lib/pkgconfig:$usr/share/pkgconfig" PKG_CONFIG_PATH='' "$pc" --cflags --libs --static "$m" \
      > /dev/null; then
      echo "ok   pkg-config $m from the prefix alone"
    else echo "FAIL pkg-config $m from the prefix alone"; bad=1; fi
  done
  for h in boost/dll/shared_library.hpp boost/math/distributions/students_t.hpp boost/program_options.hpp \
    toml++/toml.h sqlite3.h httplib.h openssl/ssl.h brotli/decode.h gtest/gtest.h gmock/gmock.h cairo/cairo.h \
    zlib.h armadillo superlu/supermatrix.h \
    gloo/context.h gloo/algorithm.h gloo/rendezvous/store.h gloo/transport/device.h; do
    [ -e "$usr/include/$h" ] || { echo "FAIL missing header $h"; bad=1; }
  done
  for f in "$usr"/lib/lib*.so "$lib"/lib*.so "$lib"/cmake/Boost-1.74.0/BoostConfig.cmake \
    "$lib"/cmake/GTest/GTestConfig.cmake "$lib"/cmake/tomlplusplus/tomlplusplusConfig.cmake; do
    [ -e "$f" ] || { echo "FAIL dangling or missing $f"; bad=1; }
  done
  while IFS= read -r -d '' f; do
    head -c4 "$f" | grep -q ELF || continue
    for needed in $(LC_ALL=C readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -e "$lib/$needed" ] || [ -e "$usr/lib/$needed" ] || [[ $needed =~ $BASE_LIBS ]] && continue
      if [ "${STRICT:-0}" != 1 ] && [ -n "$(system_lib "$needed")" ]; then continue; fi
      echo "FAIL ${f#"$prefix"/} needs $needed"; bad=1
    done
  done < <(find "$prefix" -path "$prefix/.shadowed" -prune -o -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0)
  if [ "$bad" != 0 ]; then echo "offline-deps: $prefix is incomplete"; return 1; fi
  echo "offline-deps: $prefix is complete"
}

case ${1:-} in
  download) shift; cmd_download "$@" ;;
  unpack) shift; cmd_unpack "$@" ;;
  check) shift; cmd_check "$@" ;;
  closure) closure ;;
  *) sed -n '2,13p' "$0" >&2; exit 2 ;;
esac
