#!/usr/bin/env bash
# accuracy-os.sh: holds every row of smtlab's OS latency table against a single-threaded
# reference on this machine, like for like.
#
# The reference, scripts/accuracy-os/ref.c (compiled here with gcc), is one small
# process with one thread, as lmbench's are: per iteration it does exactly what smtlab's
# row of the same name does (crates/bench/src/os/*.rs: getppid through syscall(2), one
# byte from /dev/zero or to /dev/null, stat/fstat/open+close of a temporary file, select
# for writing on 10 dups of a file or 10 loopback TCP sockets, sigaction, a signal to
# itself minus the cost of sending, a 4-byte round trip through two pipes to a child,
# fork+_exit, fork+execve /bin/true, fork+/bin/sh -c /bin/true, each followed by
# wait). It runs pinned to the CPU that smtlab's 1c1t cell used (read from smtlab's JSON),
# its children on the same CPU, as smtlab's 1c1t places them; it times BATCHES batches
# of about BATCH_MS each (smtlab's default sample count and length) after calibrating.
#
# For each row the two run in turn, smtlab then the reference, PAIRS times, so drift of
# the machine (other load, frequency) falls on both. Each run gives one figure, STAT of
# its samples (smtlab) or batches (reference); the ratio of a row is the median of the
# PAIRS per-pair ratios smtlab / reference, and the ns columns are the medians of the runs.
#
# Usage: scripts/accuracy-os.sh [ROW...]    (from anywhere; builds what is missing)
#   ROW...           rows to check (default: all fourteen, in the table's order)
# Environment:
#   SMTLAB=path      smtlab binary, with smtlab-os-child beside it (default:
#                    target/release/smtlab, both built if missing)
#   PLACEMENT=spec   smtlab placement (default 1c1t); must be one CPU
#   PAIRS=n          smtlab/reference pairs per row (default 5)
#   FORK_PAIRS=n     pairs per fork row (default 21): where each process's libraries
#                    and stack land (address randomisation) decides how many code and
#                    stack pages a fork's child and parent fault in, one or two more or
#                    fewer per fork, so one pair's ratio scatters by +-7% on its own
#   STAT=min|median  figure of one run (default min: on a shared machine interruptions
#                    only ever add time, so the fastest sample is the steadiest figure;
#                    for sig-handler the fastest catching loop minus the fastest sending
#                    loop, on both sides)
#   BATCHES=n, BATCH_MS=ms   the reference's batches (default 30 of 10 ms)
#   TOLERANCE=f      relative difference accepted (default 0.05)
#   GROW_MB=n        the fork rows' forking process holds n MiB more of touched memory
#                    (smtlab's `--param grow_mb=n`); the reference grows to the size
#                    smtlab's samples state (`forking_mappings`, `forking_anon_bytes` in
#                    its JSON), so the fork rows compare processes of one size
#   PERF=1|path      also hold null-syscall and pipe-latency against `perf bench syscall
#                    basic` and `perf bench sched pipe` (taskset to the same CPU); perf
#                    prints a mean over its whole run, compared with smtlab's median
# Prints a table: benchmark, smtlab ns, reference ns, ratio, within tolerance. Exit
# status: 0 if every row is within the tolerance, 1 if one is not, 2 if a tool is
# missing or fails. The whole table takes about 5-7 minutes with the defaults.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PLACEMENT=${PLACEMENT:-1c1t}
PAIRS=${PAIRS:-5}
FORK_PAIRS=${FORK_PAIRS:-21}
STAT=${STAT:-min}
BATCHES=${BATCHES:-30}
BATCH_MS=${BATCH_MS:-10}
TOLERANCE=${TOLERANCE:-0.05}
PERF=${PERF:-}
ALL_ROWS=(null-syscall read write stat fstat open-close select-file select-tcp
    sig-install sig-handler pipe-latency fork-exit fork-exec fork-sh)

need_python3
command -v gcc >/dev/null || die "gcc is needed to build the reference"
[[ $STAT == min || $STAT == median ]] || die "STAT=$STAT: expected min or median"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
REF=$WORK/ref
# Bound at load (-z now), as smtlab's binaries are: with lazy binding each forked child
# would run the dynamic linker to find `_exit`, about 10 us per fork-exit that is not
# the fork's.
gcc -O2 -Wall -Wl,-z,now -o "$REF" "$ROOT/scripts/accuracy-os/ref.c" || die "gcc could not build the reference"

SMTLAB=${SMTLAB:-$ROOT/target/release/smtlab}
if [[ ! -x "$SMTLAB" || ! -x "$(dirname "$SMTLAB")/smtlab-os-child" ]] && [[ $SMTLAB == "$ROOT/target/release/smtlab" ]]; then
    echo "accuracy-os: building smtlab and smtlab-os-child (release)" >&2
    (cd "$ROOT" && cargo build --release -p smtlab >&2) || die "cargo build --release -p smtlab failed"
fi
[[ -x "$SMTLAB" ]] || die "no smtlab binary at $SMTLAB"
[[ -x "$(dirname "$SMTLAB")/smtlab-os-child" ]] ||
    echo "accuracy-os: no smtlab-os-child beside $SMTLAB: smtlab measures from itself (fork rows read high)" >&2

PERF_BIN=
if [[ -n "$PERF" && "$PERF" != 0 ]]; then
    PERF_BIN=$PERF
    [[ "$PERF" == 1 ]] && PERF_BIN=$(command -v perf || true)
    [[ -n "$PERF_BIN" ]] && "$PERF_BIN" bench syscall basic -l 1000 >/dev/null 2>&1 ||
        die "PERF=$PERF: no perf that runs 'perf bench' here"
fi

# The one place that knows the results JSON (smtlab.results/1): prints "CPU MIN MEDIAN
# MAPPINGS ANON_KIB" of the first cell: the CPU of its placement, its fastest sample, its
# median, and for a fork row the forking process's size (0 0 for other rows).
smtlab_figures() {
    python3 -c '
import json, statistics, sys
name = sys.argv[1]
doc = json.load(sys.stdin)
cell = next((c for c in doc.get("cells", []) if c.get("benchmark") == name), None)
if cell is None:
    sys.exit("no cell of benchmark %s in the JSON" % name)
samples = cell["result"]["samples"]
values = [s["value"] for s in samples]
fastest = min(values)
m = [s.get("metrics", {}) for s in samples]
if name == "sig-handler":
    # The fastest difference would favour a sample whose sending loop was disturbed:
    # fastest catching loop minus fastest sending loop, as the reference does.
    if all("send_and_catch_ns" in x and "send_ns" in x for x in m):
        fastest = min(x["send_and_catch_ns"] for x in m) - min(x["send_ns"] for x in m)
threads = {x.get("measuring_process_threads") for x in m}
if threads != {1.0}:
    print("accuracy-os: %s: the measuring process did not report one thread (%s)" % (name, sorted(threads, key=str)), file=sys.stderr)
maps = max((x.get("forking_mappings", 0) for x in m), default=0)
anon_kib = max((x.get("forking_anon_bytes", 0) for x in m), default=0) / 1024
print(cell["placement"]["cpus"][0], fastest, statistics.median(values), int(maps), int(anon_kib))
' "$1"
}

# One smtlab run of row $1: "CPU MIN MEDIAN MAPPINGS ANON_KIB".
smtlab_run() {
    local out
    local grow=()
    [[ $1 == fork-* && -n ${GROW_MB:-} ]] && grow=(--param "grow_mb=$GROW_MB")
    out=$("$SMTLAB" bench "$1" --placement "$PLACEMENT" "${grow[@]}" --json -q) ||
        die "smtlab bench $1 --placement $PLACEMENT ${grow[*]} failed"
    smtlab_figures "$1" <<<"$out" || die "cannot read smtlab's result for $1"
}

# One reference run of row $1 on CPU $2: "MIN MEDIAN". A fork row's reference first
# grows to the size of smtlab's forking process ($3 mappings, $4 KiB anonymous): fork
# time grows with the mappings and anonymous pages copied, so only processes of one
# size compare.
ref_run() {
    local grow=()
    [[ $1 == fork-* && ${3:-0} -gt 0 ]] && grow=("$3" "$4")
    "$REF" "$1" "$2" "$BATCHES" "$BATCH_MS" "${grow[@]}" 2>>"$WORK/ref.log" ||
        die "the reference failed on $1: $(tail -n 1 "$WORK/ref.log")"
}

# "usecs/op" of a `perf bench` run on CPU $1, in ns, printed twice (as MIN and MEDIAN).
perf_run() {
    local cpu=$1 out
    shift
    out=$(taskset -c "$cpu" "$PERF_BIN" bench "$@" 2>&1) || die "perf bench $* failed: $out"
    awk '/usecs\/op/ { v = $1 * 1000; printf "%.3f %.3f\n", v, v; found = 1 } END { exit !found }' <<<"$out" ||
        die "no usecs/op in the output of perf bench $*: $out"
}

pick() { # $1 = "MIN MEDIAN" -> the STAT one
    if [[ $STAT == min ]]; then echo "${1%% *}"; else echo "${1##* }"; fi
}

# Prints "LABEL SMTLAB_NS REF_NS RATIO" for row $1 against the command in the rest
# ("ref" or "perf ARGS...").
compare() {
    local row=$1 label=$2 kind=$3
    shift 3
    local s r ratios=() ss=() rs=() i cpu fastest median maps anon sv rv pairs=$PAIRS
    [[ $row == fork-* ]] && pairs=$FORK_PAIRS
    for ((i = 0; i < pairs; i++)); do
        read -r cpu fastest median maps anon <<<"$(smtlab_run "$row")"
        if [[ $kind == ref ]]; then
            sv=$(pick "$fastest $median")
            rv=$(pick "$(ref_run "$row" "$cpu" "$maps" "$anon")")
        else
            sv=$median # perf gives a mean: compare smtlab's median
            rv=$(perf_run "$cpu" "$@")
            rv=${rv%% *}
        fi
        ss+=("$sv")
        rs+=("$rv")
        ratios+=("$(python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "$sv" "$rv")")
    done
    python3 -c '
import statistics, sys
label, n = sys.argv[1], int(sys.argv[2])
v = [float(x) for x in sys.argv[3:]]
s, r, q = v[:n], v[n:2 * n], v[2 * n:]
print(label, statistics.median(s), statistics.median(r), statistics.median(q), " ".join("%.3f" % x for x in q))
' "$label" "$pairs" "${ss[@]}" "${rs[@]}" "${ratios[@]}"
}

ROWS=("$@")
[[ ${#ROWS[@]} -gt 0 ]] || ROWS=("${ALL_ROWS[@]}")
echo "accuracy-os: $(uname -r), smtlab $SMTLAB placement $PLACEMENT, $PAIRS pairs per row ($FORK_PAIRS per fork row), $STAT of each run, reference $BATCHES x ${BATCH_MS} ms" >&2
TABLE=$(
    for row in "${ROWS[@]}"; do
        compare "$row" "$row" ref
        echo "accuracy-os: $row done" >&2
    done
    if [[ -n "$PERF_BIN" ]]; then
        compare null-syscall "null-syscall/perf" perf syscall basic -l 1000000
        compare pipe-latency "pipe-latency/perf" perf sched pipe -l 100000
    fi
)

python3 - "$TOLERANCE" <<PY
import sys
tol = float(sys.argv[1])
rows = [l.split() for l in """$TABLE""".strip().splitlines()]
print(f"{'benchmark':<18} {'smtlab ns':>11} {'reference ns':>12} {'ratio':>7}  within {tol:.0%}  pair ratios")
bad = 0
for name, s, r, q, *pairs in rows:
    s, r, q = float(s), float(r), float(q)
    ok = abs(q - 1) <= tol
    bad += not ok
    print(f"{name:<18} {s:>11.1f} {r:>12.1f} {q:>7.3f}  {'yes' if ok else 'NO ':<9}  {' '.join(pairs)}")
sys.exit(1 if bad else 0)
PY
