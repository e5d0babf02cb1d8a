#!/usr/bin/env bash
# accuracy-os.sh: checks smtlab's OS latency figures against `perf bench` on this
# machine, in one run, like for like:
#
#   smtlab null-syscall (placement 1c1t)  vs  taskset -c CPU perf bench syscall basic
#   smtlab pipe-latency (placement 1c1t)  vs  taskset -c CPU perf bench sched pipe
#
# What perf measures (tools/perf/bench/syscall.c and sched-pipe.c in the kernel tree):
# * `perf bench syscall basic` calls getppid() 10,000,000 times (-l/--loop changes it)
#   and prints "usecs/op" = total time / loops: one getppid per op, what smtlab's
#   null-syscall times (smtlab calls it through syscall(SYS_getppid)).
# * `perf bench sched pipe` forks a child and runs 1,000,000 loops (-l) in which the
#   parent writes a 4-byte int to pipe 1 and reads it back from pipe 2 while the child
#   reads pipe 1 and writes pipe 2; "usecs/op" = total time / loops, so one op is one
#   full round trip, what smtlab's pipe-latency reports (also 4-byte tokens). perf's
#   time also covers pipe creation, the fork and the final wait (about 0.1 ms over
#   seconds). perf does not pin its two processes, so both are confined to one CPU with
#   taskset, which is what smtlab's 1c1t placement does (child on the same CPU). Across
#   two CPUs the scheduler decides where perf's processes run, so no like-for-like
#   figure exists for 2c1t.
#
# Usage: scripts/accuracy-os.sh            (from anywhere; builds smtlab if needed)
# Environment:
#   SMTLAB=path      smtlab binary (default: target/release/smtlab, built if missing)
#   PERF=path        perf binary (default: found, or installed with apt-get when root)
#   PLACEMENT=spec   smtlab placement (default 1c1t); must be the one CPU given in CPU
#   CPU=n            CPU for perf's taskset (default 0, the CPU 1c1t takes); on a busy
#                    machine pick an idle one for both: CPU=1 PLACEMENT=cpus=1
#   REPEAT=n         runs per side, the median is compared (default 7)
#   SYSCALL_LOOPS=n  perf syscall loops (default 10000000, perf's default)
#   PIPE_LOOPS=n     perf pipe loops (default 1000000, perf's default)
#   TOLERANCE=f      relative difference accepted (default 0.10)
# Exit status: 0 if every row is within the tolerance, 1 if one is not, 2 if a tool is
# missing or fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CPU=${CPU:-0}
PLACEMENT=${PLACEMENT:-1c1t}
REPEAT=${REPEAT:-7}
SYSCALL_LOOPS=${SYSCALL_LOOPS:-10000000}
PIPE_LOOPS=${PIPE_LOOPS:-1000000}
TOLERANCE=${TOLERANCE:-0.10}

die() {
    echo "accuracy-os: $*" >&2
    exit 2
}

command -v python3 >/dev/null || die "python3 is needed to read smtlab's JSON"
command -v taskset >/dev/null || die "taskset (util-linux) is needed to pin perf"

# A perf that can run `perf bench` under this kernel. On Debian /usr/bin/perf may be a
# wrapper that only execs perf_<kernel version> and refuses other kernels; the real
# binaries live at /usr/bin/perf_* or /usr/lib/linux-tools*/perf.
perf_works() {
    "$1" bench syscall basic -l 1000 >/dev/null 2>&1
}

find_perf() {
    local c
    for c in ${PERF:-} "$(command -v perf || true)" /usr/bin/perf_* /usr/lib/linux-tools*/perf \
        /usr/lib/linux-tools/*/perf; do
        [[ -n "$c" && -x "$c" ]] || continue
        if perf_works "$c"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

if ! PERF_BIN=$(find_perf); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "accuracy-os: perf not found; installing linux-perf with apt-get" >&2
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >&2 ||
            die "apt-get install linux-perf failed"
        PERF_BIN=$(find_perf) || die "linux-perf installed, but no perf binary runs 'perf bench' on kernel $(uname -r)"
    else
        die "no working perf (set PERF=path, or run as root to install linux-perf)"
    fi
fi

SMTLAB=${SMTLAB:-$ROOT/target/release/smtlab}
if [[ ! -x "$SMTLAB" ]]; then
    echo "accuracy-os: building smtlab (release)" >&2
    (cd "$ROOT" && cargo build --release --bin smtlab >&2) || die "cargo build --release failed"
fi
[[ -x "$SMTLAB" ]] || die "no smtlab binary at $SMTLAB"

# The one place that knows the results JSON: the median of the cell of benchmark $1, in
# ns. It reads `cells[].result.summary.median` (smtlab.results/1) and otherwise any
# object naming the benchmark with a `summary.median`, so a reshaped schema needs a
# change here only.
smtlab_median_ns() {
    python3 -c '
import json, sys
name = sys.argv[1]
doc = json.load(sys.stdin)

def cells(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from cells(v)
    elif isinstance(node, list):
        for v in node:
            yield from cells(v)

def median(cell):
    for holder in (cell.get("result"), cell):
        if isinstance(holder, dict) and isinstance(holder.get("summary"), dict):
            m = holder["summary"].get("median")
            if isinstance(m, (int, float)):
                return m
    return None

for cell in cells(doc):
    bench = cell.get("benchmark")
    if isinstance(bench, dict):
        bench = bench.get("name")
    if bench == name and median(cell) is not None:
        print(median(cell))
        sys.exit(0)
sys.exit("no cell of benchmark %s with summary.median in the JSON" % name)
' "$1"
}

# "usecs/op" of a `perf bench` run, in ns.
perf_ns() {
    local out
    out=$(taskset -c "$CPU" "$PERF_BIN" bench "$@" 2>&1) || die "perf bench $* failed: $out"
    awk '/usecs\/op/ { printf "%.3f\n", $1 * 1000; found = 1 } END { exit !found }' <<<"$out" ||
        die "no usecs/op in the output of perf bench $*: $out"
}

smtlab_ns() {
    local out
    out=$("$SMTLAB" bench "$1" --placement "$PLACEMENT" --json) || die "smtlab bench $1 --placement $PLACEMENT failed"
    smtlab_median_ns "$1" <<<"$out" || die "cannot read smtlab's result for $1"
}

median_of() {
    python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"
}

# Alternating the two tools spreads any drift of the machine (other load, frequency)
# over both sides instead of one.
compare() {
    local bench=$1
    shift
    local s=() p=() i
    for ((i = 0; i < REPEAT; i++)); do
        s+=("$(smtlab_ns "$bench")")
        p+=("$(perf_ns "$@")")
    done
    printf '%s %s %s\n' "$bench" "$(median_of "${s[@]}")" "$(median_of "${p[@]}")"
}

echo "accuracy-os: $(uname -r), perf $("$PERF_BIN" --version 2>/dev/null | awk '{print $3}') at $PERF_BIN on CPU $CPU, smtlab placement $PLACEMENT, $REPEAT runs per side" >&2
ROWS=$(
    compare null-syscall syscall basic -l "$SYSCALL_LOOPS"
    compare pipe-latency sched pipe -l "$PIPE_LOOPS"
)

python3 - "$TOLERANCE" <<PY
import sys
tol = float(sys.argv[1])
rows = [l.split() for l in """$ROWS""".strip().splitlines()]
print(f"{'benchmark':<14} {'smtlab ns':>11} {'perf ns':>11} {'ratio':>7}  within {tol:.0%}")
bad = 0
for name, s, p in rows:
    s, p = float(s), float(p)
    ratio = s / p if p > 0 else float("inf")
    ok = abs(ratio - 1) <= tol
    bad += not ok
    print(f"{name:<14} {s:>11.1f} {p:>11.1f} {ratio:>7.3f}  {'yes' if ok else 'no'}")
sys.exit(1 if bad else 0)
PY
