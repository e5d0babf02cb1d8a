#!/usr/bin/env bash
# The Linux kernel source tree as one tarball, taken from Debian's linux-source package
# (apt-get download) and kept in a cache directory; prints the tarball's path. Beside it,
# NAME.version holds the package version it came from. scripts/kernel-pmu-events.sh
# reads the perf event lists from it and scripts/smt-vm.sh builds the guest kernels.
#
#   scripts/kernel-source.sh             # prints target/reference/linux-source-6.12.tar.xz
#   scripts/kernel-source.sh --cached    # the same, but fails instead of downloading
#   SMTLAB_CACHE=/some/dir KERNEL_SOURCE_PACKAGE=linux-source-6.12 scripts/kernel-source.sh
set -euo pipefail
cd "$(dirname "$0")/.."
pkg="${KERNEL_SOURCE_PACKAGE:-linux-source-6.12}"
cache="${SMTLAB_CACHE:-$PWD/target/reference}"
tarball="$cache/$pkg.tar.xz"
if [ -s "$tarball" ] && [ -s "$cache/$pkg.version" ]; then
  echo "$tarball"
  exit 0
fi
if [ "${1:-}" = --cached ]; then
  echo "kernel-source: $tarball not fetched yet (scripts/kernel-source.sh)" >&2
  exit 1
fi
command -v apt-get >/dev/null || { echo "kernel-source: needs apt-get (Debian) to fetch $pkg" >&2; exit 1; }
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) || {
  [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1
  (cd "$tmp" && apt-get download "$pkg" >/dev/null)
}
deb=$(ls "$tmp"/*.deb)
# The package holds one tarball of the kernel tree (usr/src/NAME.tar.xz).
dpkg-deb --fsys-tarfile "$deb" | tar -x --wildcards '*.tar.xz' -O >"$tmp/src.tar.xz"
dpkg-deb -f "$deb" Version >"$cache/$pkg.version"
mv "$tmp/src.tar.xz" "$tarball"
echo "$tarball"
