#!/usr/bin/env bash
# The Linux kernel's x86 perf event lists and metric tables
# (tools/perf/pmu-events/arch/x86), taken from Debian's linux-source package and kept
# in a cache directory; prints that directory. The event-encoding test
# (crates/counters/tests/kernel_event_lists.rs, via SMTLAB_PMU_EVENTS) and
# scripts/check-formulas.sh read them.
#
#   scripts/kernel-pmu-events.sh            # prints the directory, fetching once
#   SMTLAB_CACHE=/some/dir scripts/kernel-pmu-events.sh
set -euo pipefail
cd "$(dirname "$0")/.."
pkg="${KERNEL_SOURCE_PACKAGE:-linux-source-6.12}"
cache="${SMTLAB_CACHE:-$PWD/target/reference}"
dest="$cache/$pkg"
arch="$dest/tools/perf/pmu-events/arch/x86"
if [ -f "$arch/mapfile.csv" ]; then
  echo "$arch"
  exit 0
fi
command -v apt-get >/dev/null || { echo "kernel-pmu-events: needs apt-get (Debian) to fetch $pkg" >&2; exit 1; }
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) || {
  [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1
  (cd "$tmp" && apt-get download "$pkg" >/dev/null)
}
deb=$(ls "$tmp"/*.deb)
mkdir -p "$tmp/out"
# The package holds one tarball of the kernel tree; only the x86 event lists are kept.
dpkg-deb --fsys-tarfile "$deb" | tar -x --wildcards '*.tar.xz' -O \
  | tar -xJ -C "$tmp/out" --strip-components=1 --wildcards '*/tools/perf/pmu-events/arch/x86/*'
rm -rf "$dest"
mv "$tmp/out" "$dest"
echo "$arch"
