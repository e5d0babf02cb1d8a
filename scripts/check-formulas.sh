#!/usr/bin/env bash
# Holds smtlab's counter formulas (top-down level 1 and memory bound, IPC, CPI, L2 MPKI, the share of
# time both SMT threads ran, the instruction mix, DRAM bandwidth, the CPI stack's split of
# bad speculation into branch mispredicts and machine clears) against
# pmu-tools' toplev models and the Linux kernel's perf metric tables, for Skylake-SP,
# Ice Lake-SP, Sapphire Rapids, Granite Rapids and Zen 3/4/5, with no PMU needed: the
# same counts (synthetic, written as `perf stat -x, -A` writes them) go to
# `smtlab counters import` and to each reference; so do the counts `perf stat` recorded
# on real Sapphire Rapids, Tiger Lake, Skylake and Zen 4 machines (crates/cli/tests/recorded/), to
# the kernel's tables. Fails on a difference over 0.1 percentage point (shares) or 0.1%
# (ratios).
#
#   scripts/check-formulas.sh               # 200 count sets per microarchitecture
#   TRIALS=20 scripts/check-formulas.sh
#   SMTLAB=target/release/smtlab scripts/check-formulas.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${SMTLAB_CACHE:-$PWD/target/reference}"
pmu_tools_version="${PMU_TOOLS_VERSION:-2026.7.24.0}"
pmu_tools="$cache/pmu-tools-$pmu_tools_version"
if [ ! -f "$pmu_tools/toplev.py" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/fetch.XXXXXX")
  python3 -m pip download --quiet --no-deps -d "$tmp" "pmu-tools==$pmu_tools_version"
  python3 -m zipfile -e "$tmp"/pmu_tools-*.whl "$tmp/out"
  rm -rf "$pmu_tools"
  mv "$tmp/out" "$pmu_tools"
  rm -rf "$tmp"
fi
kernel=$(scripts/kernel-pmu-events.sh)
if [ -z "${SMTLAB:-}" ]; then
  cargo build --quiet -p smtlab --bin smtlab
  SMTLAB="${CARGO_TARGET_DIR:-target}/debug/smtlab"
fi
exec python3 scripts/check_formulas.py "$SMTLAB" "$pmu_tools" "$kernel" --trials "${TRIALS:-200}"
