#!/usr/bin/env bash
# accuracy-agent.sh: checks that a load run by an smtlab agent (`smtlab agent`, driven
# with `smtlab load --client-hosts`) gives the same requests/s as `smtlab load` run
# locally on the same CPUs, against the same nginx, the two taking turns:
#
#   nginx: 1 worker on SERVER_CPU (master there too), one 4 KiB file, no access log
#   local: smtlab load URL -c CONNS -d SECS -t 1 --cpus CLIENT_CPU --busy-poll BUSY_POLL
#   agent: smtlab agent --listen 127.0.0.1:PORT --cpus CLIENT_CPU (started once), and
#          smtlab load URL -c CONNS -d SECS -t 1 --busy-poll BUSY_POLL --client-hosts ...
#
# Both keep CONNS HTTP/1.1 connections alive on one client thread pinned to CLIENT_CPU;
# the agent talks to its coordinator over loopback, so what differs is the agent's path
# alone (its protocol, start barrier, pinning and histogram merge). Each round runs
# local, agent, local (or agent, local, agent on even rounds) and compares the middle
# run with the mean of the other two; the two runs of one side in a round, compared with
# each other, show how much the machine moved (the noise floor).
#
# Target: the median agent/local ratio within 0.95 .. 1.05 (equal within noise).
#
# Usage: scripts/accuracy-agent.sh   (needs nginx: apt-get install nginx)
# Environment:
#   SMTLAB=path     smtlab binary (default: target/release/smtlab, built if missing)
#   SERVER_CPU=n    nginx's CPU (default 0)     CLIENT_CPU=n  the client's CPU (default 1)
#   CONNS=n         connections (default 100)   SECS=n        seconds per run (default 2)
#   REPEAT=n        rounds (default 8)          BUSY_POLL=us  --busy-poll (default 50)
# Exit status: 0 if the target is met, 1 if not, 2 if a tool is missing or fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-100}
SECS=${SECS:-2}
REPEAT=${REPEAT:-8}
BUSY_POLL=${BUSY_POLL:-50}

need_python3
command -v curl >/dev/null || die "curl is needed to wait for nginx"

need_smtlab

WORK=$(mktemp -d /tmp/smtlab-accuracy-agent.XXXXXX)
chmod 755 "$WORK"
PORT=$(free_port)
AGENT_PORT=$(free_port)
head -c 24 /dev/urandom | base64 >"$WORK/token"
chmod 600 "$WORK/token"   # the agent refuses a token others can read
start_nginx "$WORK" "$PORT" "$SERVER_CPU"
"$SMTLAB" agent --listen "127.0.0.1:$AGENT_PORT" --token "$WORK/token" --cpus "$CLIENT_CPU" \
    >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
cleanup() {
    kill "$AGENT_PID" "$NGINX_PID" 2>/dev/null || true
    wait "$AGENT_PID" "$NGINX_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
URL="http://127.0.0.1:$PORT/f4k"
for _ in $(seq 100); do
    curl -sf -o /dev/null "$URL" 2>/dev/null && grep -q listening "$WORK/agent.log" && break
    sleep 0.05
done
curl -sf -o /dev/null "$URL" || die "nginx did not come up: $(tail -1 "$WORK/error.log" 2>/dev/null)"
grep -q listening "$WORK/agent.log" || die "the agent did not come up: $(cat "$WORK/agent.log")"

rate() {
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["requests_per_s"] if not any(d["errors"].values()) else "errors:%s" % d["errors"])'
}
run_local() {
    "$SMTLAB" load "$URL" -c "$CONNS" -d "$SECS" -t 1 --cpus "$CLIENT_CPU" --busy-poll "$BUSY_POLL" --json | rate
}
run_agent() {
    "$SMTLAB" load "$URL" -c "$CONNS" -d "$SECS" -t 1 --busy-poll "$BUSY_POLL" --json \
        --client-hosts "127.0.0.1:$AGENT_PORT" --client-token "$WORK/token" | rate
}
check() { case "$1" in errors:* | "") die "a load failed: '$1'" ;; esac; }

echo "nginx 1 worker on CPU $SERVER_CPU; client thread on CPU $CLIENT_CPU; $CONNS keep-alive connections; 4 KiB file; ${SECS} s per run"
echo "round  order              local req/s   agent req/s   agent/local   same-side noise"
RATIOS=()
NOISE=()
for i in $(seq "$REPEAT"); do
    if [ $((i % 2)) = 1 ]; then
        a=$(run_local); check "$a"; m=$(run_agent); check "$m"; b=$(run_local); check "$b"
        r=$(awk -v m="$m" -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", 2 * m / (a + b)}')
        loc=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.0f", (a + b) / 2}'); ag=$m; order="local,agent,local"
    else
        a=$(run_agent); check "$a"; m=$(run_local); check "$m"; b=$(run_agent); check "$b"
        r=$(awk -v m="$m" -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", (a + b) / 2 / m}')
        ag=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.0f", (a + b) / 2}'); loc=$m; order="agent,local,agent"
    fi
    n=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')
    printf '%5d  %-17s  %11.0f   %11.0f   %11s   %s\n' "$i" "$order" "$loc" "$ag" "$r" "$n"
    RATIOS+=("$r")
    NOISE+=("$n")
done
RATIO=$(printf '%s\n' "${RATIOS[@]}" | median)
read -r RQ1 RQ3 <<<"$(printf '%s\n' "${RATIOS[@]}" | quartiles)"
NM=$(printf '%s\n' "${NOISE[@]}" | median)
read -r NQ1 NQ3 <<<"$(printf '%s\n' "${NOISE[@]}" | quartiles)"
echo "agent / local: median $RATIO (quartiles $RQ1 .. $RQ3); target 0.95 .. 1.05"
echo "noise floor, one side against itself in a round: median $NM (quartiles $NQ1 .. $NQ3)"
awk -v r="$RATIO" 'BEGIN {exit !(r >= 0.95 && r <= 1.05)}' || exit 1
