#!/usr/bin/env bash
# dbench-compare.sh: smtlab's dbench and tbench beside the dbench package's own dbench
# and tbench/tbench_srv, on the same load file, client count and CPUs, in one run (the
# two sides take turns, ROUNDS times, so a change of the machine's speed falls on both).
#
#   smtlab bench dbench -p cpus=CPU          vs  taskset -c CPU dbench -c LOADFILE N
#   smtlab bench tbench -p cpus=CPU          vs  taskset -c CPU tbench_srv
#     (client on CLIENT_CPU, chosen by smtlab)     taskset -c CLIENT_CPU tbench N 127.0.0.1
#
# Prints each side's MB/s (median of the rounds) and the ratio smtlab / reference, then
# why the two are not expected to agree exactly (see the end of this file).
#
# As root the script re-runs itself in a private network namespace, so tbench_srv's
# fixed port (7003) cannot collide with anything else on the machine; both sides run in
# that namespace.
#
# Environment:
#   SMTLAB=path    smtlab binary (default target/release/smtlab, built if missing)
#   CLIENTS=n      clients on both sides (default 4)
#   SECS=n         seconds per reference run (default 10); smtlab runs 1 s samples
#                  until its confidence target or about 5 s
#   CPU=n          server / dbench CPU (default 0); CLIENT_CPU=n tbench client (default 1)
#   LOADFILE=path  default /usr/share/dbench/client.txt
#   DIR=path       where both sides create their files (default $TMPDIR or /tmp)
#   ROUNDS=n       turns per side (default 3)
# Exit status: 0 when both comparisons ran, 2 when a tool is missing or fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
own_netns "$@"

CLIENTS=${CLIENTS:-4}
SECS=${SECS:-10}
CPU=${CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LOADFILE=${LOADFILE:-/usr/share/dbench/client.txt}
DIR=${DIR:-${TMPDIR:-/tmp}}
ROUNDS=${ROUNDS:-3}

for tool in dbench tbench tbench_srv taskset python3; do
    command -v "$tool" >/dev/null || die "$tool is not installed (Debian package: dbench, util-linux, python3)"
done
[ -r "$LOADFILE" ] || die "cannot read the load file $LOADFILE"

need_smtlab

mean_of_json() {
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["cells"][0]["result"]["summary"]["mean"])'
}

median() {
    python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"
}

smtlab_side() {
    local bench=$1
    local extra=()
    [ "$bench" = dbench ] && extra=(--param "dir=$DIR")
    "$SMTLAB" bench "$bench" -p "cpus=$CPU" --param "clients=$CLIENTS" \
        --param duration=1s --param "loadfile=$LOADFILE" "${extra[@]}" --json |
        mean_of_json
}

reference_dbench() {
    local work
    work=$(mktemp -d "$DIR/dbench-ref-XXXXXX")
    local out
    out=$(taskset -c "$CPU" dbench -c "$LOADFILE" -t "$SECS" -D "$work" "$CLIENTS" 2>&1) || {
        rm -rf "$work"
        die "dbench failed: $(echo "$out" | tail -1)"
    }
    rm -rf "$work"
    echo "$out" | sed -n 's/.*Throughput \([0-9.]*\) MB\/sec.*/\1/p' | tail -1
}

SRV=
cleanup() {
    if [ -n "$SRV" ]; then
        kill "$SRV" 2>/dev/null || true
        wait "$SRV" 2>/dev/null || true
    fi
}
trap cleanup EXIT

reference_tbench() {
    taskset -c "$CPU" tbench_srv >/dev/null 2>&1 &
    SRV=$!
    sleep 0.5
    local out
    out=$(cd "$(dirname "$LOADFILE")" &&
        taskset -c "$CLIENT_CPU" tbench -c "$LOADFILE" -t "$SECS" "$CLIENTS" 127.0.0.1 2>&1) || {
        cleanup
        die "tbench failed: $(echo "$out" | tail -1)"
    }
    cleanup
    SRV=
    echo "$out" | sed -n 's/.*Throughput \([0-9.]*\) MB\/sec.*/\1/p' | tail -1
}

echo "dbench-compare: $CLIENTS clients, load $LOADFILE, server CPU $CPU, tbench client CPU $CLIENT_CPU, $ROUNDS rounds"
for bench in dbench tbench; do
    ours=()
    theirs=()
    for r in $(seq 1 "$ROUNDS"); do
        o=$(smtlab_side "$bench") || die "smtlab $bench failed"
        if [ "$bench" = dbench ]; then t=$(reference_dbench); else t=$(reference_tbench); fi
        [ -n "$t" ] || die "no Throughput line from the reference $bench"
        printf '  round %d %-7s smtlab %10.2f MB/s   reference %10.2f MB/s\n' "$r" "$bench" "$o" "$t"
        ours+=("$o")
        theirs+=("$t")
    done
    mo=$(median "${ours[@]}")
    mt=$(median "${theirs[@]}")
    python3 -c 'import sys; o,t=float(sys.argv[2]),float(sys.argv[3]); print(f"{sys.argv[1]:7} median: smtlab {o:.2f} MB/s, reference {t:.2f} MB/s, ratio smtlab/reference {o/t:.3f}")' "$bench" "$mo" "$mt"
done

cat <<'WHY'

Why the figures differ (both count the same bytes: the sizes of the load's reads and
writes, 10^6 bytes to the MB):
* dbench runs each client as a process and, before every path operation, scans the
  directory for the name case-insensitively ("name resolution simulation"); smtlab's
  clients are threads and QUERY_PATH_INFORMATION is a stat(2). SET_FILE_INFORMATION
  is utime(2) plus fstat in dbench, futimens in smtlab. dbench's figure is its timed
  run after its own warm-up phase; smtlab's is the mean of 1 s samples after
  discarded warm-up samples.
* tbench_srv forks a process per client and tbench reads replies with
  MSG_WAITALL|MSG_TRUNC (the kernel discards the data, no copy to user space);
  smtlab's server is a thread per client and both sides copy every byte. tbench's
  clients are processes, smtlab's threads.
WHY
