#!/usr/bin/env bash
# stream-vs-iperf3.sh: smtlab's tcp-stream beside iperf3 on loopback, like for like, in
# one run (the two take turns ROUNDS times): server on CPU 0, client on CPU 1, the same
# message size per send call.
#
#   smtlab bench tcp-stream -p cpus=SERVER_CPU --param size=SIZE
#       (smtlab puts its client on a CPU apart from the placement: CLIENT_CPU here)
#   taskset -c SERVER_CPU iperf3 -s -1      and      taskset -c CLIENT_CPU iperf3 -c 127.0.0.1 -l SIZE -t SECS
#
# Prints Gbit/s of both (median of the rounds; iperf3's receiver figure) and the ratio.
# As root the script runs in a private network namespace (iperf3's port cannot collide
# with another server).
#
# Environment:
#   SMTLAB=path      smtlab binary (default target/release/smtlab, built if missing)
#   SIZE=bytes       bytes per send (default 131072, iperf3's TCP default)
#   SECS=n           seconds per iperf3 run (default 5)
#   SERVER_CPU=n     default 0;  CLIENT_CPU=n  default 1
#   ROUNDS=n         turns per side (default 3)
# Exit status: 0 when the comparison ran, 2 when a tool is missing or fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
own_netns "$@"

SIZE=${SIZE:-131072}
SECS=${SECS:-5}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-5201}

for tool in iperf3 taskset python3; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
need_smtlab

SRV=
cleanup() {
    if [ -n "$SRV" ]; then
        kill "$SRV" 2>/dev/null || true
        wait "$SRV" 2>/dev/null || true
        SRV=
    fi
}
trap cleanup EXIT

smtlab_side() {
    "$SMTLAB" bench tcp-stream -p "cpus=$SERVER_CPU" --param "size=$SIZE" --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["cells"][0]["result"]["summary"]["mean"])'
}

iperf_side() {
    taskset -c "$SERVER_CPU" iperf3 -s -1 -p "$PORT" >/dev/null 2>&1 &
    SRV=$!
    sleep 0.5
    local out
    out=$(taskset -c "$CLIENT_CPU" iperf3 -c 127.0.0.1 -p "$PORT" -l "$SIZE" -t "$SECS" -J) ||
        die "iperf3 failed"
    cleanup
    echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["end"]["sum_received"]["bits_per_second"]/1e9)'
}

echo "stream-vs-iperf3: $SIZE-byte sends, server CPU $SERVER_CPU, client CPU $CLIENT_CPU, $ROUNDS rounds"
ours=()
theirs=()
for r in $(seq 1 "$ROUNDS"); do
    o=$(smtlab_side) || die "smtlab tcp-stream failed"
    t=$(iperf_side)
    printf '  round %d  smtlab %8.3f Gbit/s   iperf3 %8.3f Gbit/s\n' "$r" "$o" "$t"
    ours+=("$o")
    theirs+=("$t")
done
python3 - "${#ours[@]}" "${ours[@]}" "${theirs[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
o = statistics.median(float(x) for x in sys.argv[2:2 + n])
t = statistics.median(float(x) for x in sys.argv[2 + n:])
print(f"median: smtlab {o:.3f} Gbit/s, iperf3 {t:.3f} Gbit/s, ratio smtlab/iperf3 {o / t:.3f}")
PY
cat <<'WHY'

What differs: both write SIZE bytes per send(2) on one loopback connection and count
what the receiver read. iperf3 reads into a buffer of the same size and reports its
whole timed run (its first second included, -O 0); smtlab's server reads 256 KiB at a
time, a sample is 3-10 iterations of 0.5 s each, ended when the server has every byte
written, and warm-up samples are discarded.
WHY
