#!/usr/bin/env bash
# load-vs-wrk.sh: compares `smtlab load` with wrk against the same nginx, in one run,
# the two tools taking turns:
#
#   nginx: 1 worker on SERVER_CPU (master there too), one 4 KiB file, no access log
#   wrk:         taskset -c CLIENT_CPU wrk -t1 -cCONNS -dSECS URL
#   smtlab load: smtlab load URL -c CONNS -d SECS -t 1 --cpus CLIENT_CPU --busy-poll BUSY_POLL
#
# Both keep CONNS HTTP/1.1 connections alive, each with one request outstanding, on one
# client thread. The figure is requests per second; the target is a ratio
# smtlab/wrk of at least 1.0 (the goal is 1.2).
#
# Then the built-in `event` server against nginx under the same keep-alive load, as
# `web-static` cells (same file set, same connections, same CPUs), interleaved:
#   smtlab bench web-static -p 1c1t --param server=event|nginx --param keepalive=yes ...
# target: event >= 0.9x nginx.
#
# Usage: scripts/load-vs-wrk.sh   (root or not; needs nginx and wrk: apt-get install nginx wrk)
# Environment:
#   SMTLAB=path     smtlab binary (default: target/release/smtlab, built if missing)
#   SERVER_CPU=n    nginx's CPU (default 0)      CLIENT_CPU=n  the clients' CPU (default 1)
#   CONNS=n         connections (default 100)    SECS=n        seconds per run (default 2)
#   REPEAT=n        rounds (default 15); each is wrk, smtlab load, wrk, and the figure is
#                   the median over the rounds of smtlab / mean of its two wrk runs
#   BUSY_POLL=us    smtlab load --busy-poll (default 50: the client has its own CPU)
#   EVENT_ROUNDS=n  rounds of the event-vs-nginx comparison (default 5; 0 skips it)
# Exit status: 0 if both targets are met, 1 if one is not, 2 if a tool is missing or fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-100}
SECS=${SECS:-2}
REPEAT=${REPEAT:-15}
BUSY_POLL=${BUSY_POLL:-50}
EVENT_ROUNDS=${EVENT_ROUNDS:-5}

for tool in nginx wrk; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || die "$tool is not installed: apt-get install $tool"
done

need_smtlab

WORK=$(mktemp -d /tmp/smtlab-load-vs-wrk.XXXXXX)
chmod 755 "$WORK"
PORT=$(free_port)
start_nginx "$WORK" "$PORT" "$SERVER_CPU"
cleanup() {
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
URL="http://127.0.0.1:$PORT/f4k"
for _ in $(seq 100); do
    curl -sf -o /dev/null "$URL" 2>/dev/null && break
    sleep 0.05
done
curl -sf -o /dev/null "$URL" || die "nginx did not come up: $(tail -1 "$WORK/error.log" 2>/dev/null)"

run_wrk() { taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${SECS}s" "$URL" | awk '/^Requests\/sec:/ {print $2}'; }
run_smtlab() {
    "$SMTLAB" load "$URL" -c "$CONNS" -d "$SECS" -t 1 --cpus "$CLIENT_CPU" --busy-poll "$BUSY_POLL" --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["requests_per_s"] if not any(d["errors"].values()) else "errors:%s" % d["errors"])'
}

# The host's speed drifts in spells of seconds, so each smtlab run sits between two
# wrk runs and is compared with their mean; the two wrk runs compared with each other
# show how much the machine moved within a round (the noise floor).
echo "nginx 1 worker on CPU $SERVER_CPU; clients on CPU $CLIENT_CPU; $CONNS keep-alive connections; 4 KiB file"
echo "$REPEAT rounds of wrk, smtlab load (--busy-poll $BUSY_POLL), wrk; ${SECS} s each"
RATIOS=()
NOISE=()
for i in $(seq "$REPEAT"); do
    w1=$(run_wrk)
    s=$(run_smtlab)
    case "$s" in errors:*) echo "smtlab load reported $s" >&2; exit 2 ;; esac
    w2=$(run_wrk)
    r=$(awk -v s="$s" -v a="$w1" -v b="$w2" 'BEGIN {printf "%.3f", 2 * s / (a + b)}')
    n=$(awk -v a="$w1" -v b="$w2" 'BEGIN {printf "%.3f", b / a}')
    printf '  round %2d: wrk %8.0f   smtlab load %8.0f   wrk %8.0f req/s   ratio %s   (wrk/wrk %s)\n' \
        "$i" "$w1" "$s" "$w2" "$r" "$n"
    RATIOS+=("$r")
    NOISE+=("$n")
done
RATIO=$(printf '%s\n' "${RATIOS[@]}" | median)
read -r RQ1 RQ3 <<<"$(printf '%s\n' "${RATIOS[@]}" | quartiles)"
NM=$(printf '%s\n' "${NOISE[@]}" | median)
read -r NQ1 NQ3 <<<"$(printf '%s\n' "${NOISE[@]}" | quartiles)"
echo "smtlab load / wrk: median $RATIO (quartiles $RQ1 .. $RQ3); target >= 1.0, goal 1.2"
echo "noise floor, wrk / wrk in the same round: median $NM (quartiles $NQ1 .. $NQ3)"
status=0
awk -v r="$RATIO" 'BEGIN {exit !(r >= 1.0)}' || status=1

if [ "$EVENT_ROUNDS" -gt 0 ]; then
    echo
    echo "built-in event server vs nginx, web-static keep-alive, $CONNS connections, 1c1t, clients apart"
    EV=()
    NG=()
    for i in $(seq "$EVENT_ROUNDS"); do
        for server in event nginx; do
            v=$("$SMTLAB" bench web-static -p 1c1t --param "server=$server" --param keepalive=yes \
                --param "conns=$CONNS" --param dataset=16MiB --param duration=1s --json |
                python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["cells"][0]["result"]["summary"]["mean"])')
            if [ "$server" = event ]; then EV+=("$v"); else NG+=("$v"); fi
        done
        printf '  round %d: event %8.1f Mbit/s   nginx %8.1f Mbit/s\n' "$i" "${EV[-1]}" "${NG[-1]}"
    done
    E=$(printf '%s\n' "${EV[@]}" | median)
    N=$(printf '%s\n' "${NG[@]}" | median)
    R2=$(awk -v e="$E" -v n="$N" 'BEGIN {printf "%.3f", e / n}')
    echo "median: event $E Mbit/s, nginx $N Mbit/s: ratio $R2 (target >= 0.9)"
    awk -v r="$R2" 'BEGIN {exit !(r >= 0.9)}' || status=1
fi
exit $status
