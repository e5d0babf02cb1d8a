#!/usr/bin/env bash
# load-vs-wrk.sh: compares `smtlab load` with wrk against the same nginx, in one run,
# the two tools taking turns:
#
#   nginx: 1 worker on SERVER_CPU (master there too), one 4 KiB file, no access log
#   wrk:         taskset -c CLIENT_CPU wrk -t1 -cCONNS -dSECS URL
#   smtlab load: smtlab load URL -c CONNS -d SECS -t 1 --cpus CLIENT_CPU
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
#   CONNS=n         connections (default 100)    SECS=n        seconds per run (default 5)
#   REPEAT=n        runs per tool, alternating (default 5); the medians are compared
# Exit status: 0 if both targets are met, 1 if one is not, 2 if a tool is missing or fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-100}
SECS=${SECS:-5}
REPEAT=${REPEAT:-5}

for tool in nginx wrk; do
    if ! command -v "$tool" >/dev/null && [ ! -x "/usr/sbin/$tool" ]; then
        echo "load-vs-wrk: $tool is not installed: apt-get install $tool" >&2
        exit 2
    fi
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

SMTLAB=${SMTLAB:-$ROOT/target/release/smtlab}
if [ ! -x "$SMTLAB" ]; then
    (cd "$ROOT" && cargo build --release -p smtlab >&2)
fi

WORK=$(mktemp -d /tmp/smtlab-load-vs-wrk.XXXXXX)
chmod 755 "$WORK"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18480)
mkdir -p "$WORK/html"
head -c 4096 /dev/urandom >"$WORK/html/f4k"
chmod 644 "$WORK/html/f4k"
USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user nobody nogroup;"
MASK=$(python3 -c "print(format(1<<$SERVER_CPU,'b'))" 2>/dev/null || echo 1)
cat >"$WORK/nginx.conf" <<EOF
daemon off;
master_process on;
$USER_LINE
worker_processes 1;
worker_cpu_affinity $MASK;
error_log $WORK/error.log;
pid $WORK/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000000;
  client_body_temp_path $WORK/body; proxy_temp_path $WORK/proxy; fastcgi_temp_path $WORK/fcgi;
  uwsgi_temp_path $WORK/uwsgi; scgi_temp_path $WORK/scgi;
  server { listen 127.0.0.1:$PORT backlog=4096; root $WORK/html; }
}
EOF
taskset -c "$SERVER_CPU" "$NGINX" -c "$WORK/nginx.conf" -p "$WORK" &
NGINX_PID=$!
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
if ! curl -sf -o /dev/null "$URL"; then
    echo "load-vs-wrk: nginx did not come up: $(tail -1 "$WORK/error.log" 2>/dev/null)" >&2
    exit 2
fi

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "nginx 1 worker on CPU $SERVER_CPU; clients on CPU $CLIENT_CPU; $CONNS keep-alive connections; 4 KiB file; ${SECS} s x $REPEAT runs each, alternating"
WRK_RUNS=()
SMT_RUNS=()
for i in $(seq "$REPEAT"); do
    w=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${SECS}s" "$URL" | awk '/^Requests\/sec:/ {print $2}')
    s=$("$SMTLAB" load "$URL" -c "$CONNS" -d "$SECS" -t 1 --cpus "$CLIENT_CPU" --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["requests_per_s"] if not d["errors"] else "errors:%s" % d["errors"])')
    case "$s" in errors:*) echo "smtlab load reported $s" >&2; exit 2 ;; esac
    printf '  run %d: wrk %10.0f req/s   smtlab load %10.0f req/s\n' "$i" "$w" "$s"
    WRK_RUNS+=("$w")
    SMT_RUNS+=("$s")
done
W=$(printf '%s\n' "${WRK_RUNS[@]}" | median)
S=$(printf '%s\n' "${SMT_RUNS[@]}" | median)
RATIO=$(awk -v s="$S" -v w="$W" 'BEGIN {printf "%.3f", s / w}')
echo "median: wrk $W req/s, smtlab load $S req/s: ratio $RATIO (target >= 1.0, goal 1.2)"
status=0
awk -v r="$RATIO" 'BEGIN {exit !(r >= 1.0)}' || status=1

echo
echo "built-in event server vs nginx, web-static keep-alive, $CONNS connections, 1c1t, clients apart"
EV=()
NG=()
for i in $(seq "$REPEAT"); do
    for server in event nginx; do
        v=$("$SMTLAB" bench web-static -p 1c1t --param "server=$server" --param keepalive=yes \
            --param "conns=$CONNS" --param dataset=16MiB --param duration=1 --json |
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
exit $status
