#!/usr/bin/env bash
# accuracy-mem.sh: checks smtlab's memory bandwidth against likwid-bench on this machine,
# in one run, for the same buffer size and thread count:
#
#   smtlab mem-read  (size S per thread, N threads)  vs  likwid-bench -t load_avx -w S0:N*S:N
#   smtlab mem-copy  (size S per thread, N threads)  vs  likwid-bench -t copy_avx -w S0:N*S:N
#   smtlab mem-write (size S per thread, N threads)  vs  likwid-bench -t store_avx -w S0:N*S:N
#
# Both count bytes the same way: a read or write pass moves the buffer once; copy moves
# the source half plus the destination half of the buffer (bytes read + bytes written).
# likwid's `MB` is 10^6 bytes and its `MByte/s` 10^6 bytes/s; smtlab's `MB` parameter
# suffix and `GB/s` unit are decimal too. likwid's S0 workgroup takes the first N
# hardware threads of socket 0 (one per core first), which is what smtlab's Nc1t
# placement takes on a machine without SMT; on SMT machines compare with care.
#
# likwid-bench's buffers get ordinary 4 KiB pages (transparent huge pages are only given
# to memory that asks, on most distributions), so the target compares smtlab's
# `pages=base`; smtlab's default, `pages=huge`, is shown beside it.
#
# Target: smtlab (pages=base) >= 0.90x likwid for read and copy.
#
# Usage: scripts/accuracy-mem.sh
# Environment:
#   SMTLAB=path   smtlab binary (default: target/release/smtlab, built if missing)
#   SIZE_MB=n     buffer per thread in 10^6 bytes (default 128: far beyond any L3 here)
#   THREADS="1 2" thread counts to compare
#   REPEAT=n      pairs of runs, smtlab then likwid-bench (default 5); the ratio is the
#                 median of the pairs' ratios, the GB/s columns the medians of each side
#   TARGET=f      minimum accepted smtlab/likwid ratio for read and copy (default 0.90)
# Exit status: 0 if read and copy meet the target, 1 if one does not, 2 if a tool is
# missing or fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SIZE_MB=${SIZE_MB:-128}
THREADS=${THREADS:-"1 2"}
REPEAT=${REPEAT:-5}
TARGET=${TARGET:-0.90}

need_python3
if ! command -v likwid-bench >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "accuracy-mem: likwid-bench not found; installing likwid with apt-get" >&2
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq likwid >&2 ||
            die "apt-get install likwid failed"
    else
        die "likwid-bench not found (install the likwid package)"
    fi
fi

need_smtlab

# GB/s of the single cell in smtlab's results JSON: mean of the samples (throughput).
smtlab_gbps() {
    local bench=$1 threads=$2 pages=$3 out
    out=$("$SMTLAB" bench "$bench" --placement "${threads}c1t" --param "size=${SIZE_MB}MB" \
        --param "pages=$pages" --json) ||
        die "smtlab bench $bench failed"
    python3 -c 'import json,sys; print(json.load(sys.stdin)["cells"][0]["result"]["summary"]["mean"])' <<<"$out"
}

likwid_gbps() {
    local test=$1 threads=$2 out
    out=$(likwid-bench -t "$test" -w "S0:$((SIZE_MB * threads))MB:$threads" 2>&1) ||
        die "likwid-bench -t $test failed: $(tail -3 <<<"$out")"
    awk '/^MByte\/s:/ { printf "%.4f\n", $2 / 1000; found = 1 } END { exit !found }' <<<"$out" ||
        die "no MByte/s in likwid-bench output"
}

median_of() {
    python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"
}

ROWS=""
for t in $THREADS; do
    for pair in mem-read:load_avx mem-copy:copy_avx mem-write:store_avx; do
        bench=${pair%%:*}
        test=${pair##*:}
        s=() h=() l=()
        # Alternate the tools so drift of the machine hits both sides alike.
        for ((i = 0; i < REPEAT; i++)); do
            s+=("$(smtlab_gbps "$bench" "$t" base)")
            l+=("$(likwid_gbps "$test" "$t")")
            h+=("$(smtlab_gbps "$bench" "$t" huge)")
        done
        # The ratio is the median of the pairs' ratios: each pair ran back to back, so
        # the host's slow spells (its memory bandwidth wanders by 30% over minutes on a
        # shared machine) fall on both sides of a pair, not on one side of the medians.
        ratios=()
        for ((i = 0; i < REPEAT; i++)); do
            ratios+=("$(python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "${s[i]}" "${l[i]}")")
        done
        ROWS+="$bench $test $t $(median_of "${s[@]}") $(median_of "${l[@]}") $(median_of "${h[@]}") $(median_of "${ratios[@]}") ${ratios[*]}"$'\n'
    done
done

echo "accuracy-mem: $(uname -r), $SIZE_MB MB per thread, $REPEAT runs per side" >&2
python3 - "$TARGET" <<PY
import sys
target = float(sys.argv[1])
print(f"{'benchmark':<10} {'likwid test':<11} {'threads':>7} {'smtlab GB/s':>12} {'likwid GB/s':>12} {'ratio':>7}  >= {target:.2f}  {'huge pages GB/s':>15}  pair ratios")
bad = 0
for line in """$ROWS""".strip().splitlines():
    bench, test, t, s, l, h, ratio, *pairs = line.split()
    s, l, h, ratio = float(s), float(l), float(h), float(ratio)
    checked = bench in ("mem-read", "mem-copy")
    ok = ratio >= target
    bad += checked and not ok
    verdict = ("yes" if ok else "NO") if checked else "(not a target)"
    print(f"{bench:<10} {test:<11} {t:>7} {s:>12.2f} {l:>12.2f} {ratio:>7.3f}  {verdict:<14}  {h:>15.2f}  {' '.join('%.3f' % float(p) for p in pairs)}")
sys.exit(1 if bad else 0)
PY
