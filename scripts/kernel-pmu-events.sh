#!/usr/bin/env bash
# The Linux kernel's x86 perf event lists and metric tables
# (tools/perf/pmu-events/arch/x86), taken from the kernel source tarball
# (scripts/kernel-source.sh) and kept in a cache directory; prints that directory.
# The event-encoding test (crates/counters/tests/kernel_event_lists.rs, via
# SMTLAB_PMU_EVENTS) and scripts/check-formulas.sh read them.
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
tarball="$(scripts/kernel-source.sh)"
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out"
# Only the x86 event lists are kept out of the whole tree.
tar -xJf "$tarball" -C "$tmp/out" --strip-components=1 --wildcards '*/tools/perf/pmu-events/arch/x86/*'
rm -rf "$dest"
mv "$tmp/out" "$dest"
echo "$arch"
