#!/usr/bin/env bash
# load-stall.sh: shows that `smtlab load --rate` corrects coordinated omission. A small
# keep-alive HTTP/1.1 server (Python 3, one thread per connection) answers a 12-byte body
# at once, except that from AFTER seconds after its first request it answers nothing for
# STALL seconds (every connection waits), then goes on. Against a fresh server each:
#
#   open loop:   smtlab load URL --rate RATE -c CONNS -d SECS --json
#   closed loop: smtlab load URL -c CONNS -d SECS --json
#
# With the correction (latency counted from each request's scheduled time, as wrk2 does)
# every request that was due during the stall waits for it: about STALL/SECS of all
# requests are slow, so the stall reaches p99. A closed loop sends nothing while it
# waits, so only the CONNS requests in flight (one per connection) see the stall, and
# its percentiles hide it.
#
# Expectations, one line each:
#   open loop:   share of requests over 100 ms >= half of STALL/SECS, and p99 >= STALL/2
#   closed loop: requests over 100 ms about CONNS (at most 2 x CONNS)
#
# Usage: scripts/load-stall.sh   (needs python3)
# Environment:
#   SMTLAB=path     smtlab binary (default: target/release/smtlab, built if missing)
#   RATE=n          open-loop requests per second (default 500)
#   CONNS=n         connections (default 20)     SECS=n   seconds per run (default 6)
#   STALL=s         length of the stall (default 1)
#   AFTER=s         the stall starts this long after the server's first request (default 2)
#   SERVER_CPU=n    the server's CPU (default 0)  CLIENT_CPU=n  smtlab load's (default 1);
#                   both unpinned on a machine with one CPU
# Exit status: 0 if the open-loop expectation holds, 1 if not, 2 if a tool is missing or
# fails (including a server that cannot keep up with RATE outside the stall).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RATE=${RATE:-500}
CONNS=${CONNS:-20}
SECS=${SECS:-6}
STALL=${STALL:-1}
AFTER=${AFTER:-2}
if [ "$(nproc)" -ge 2 ]; then
    SERVER_CPU=${SERVER_CPU:-0}
    CLIENT_CPU=${CLIENT_CPU:-1}
else
    SERVER_CPU=${SERVER_CPU:-}
    CLIENT_CPU=${CLIENT_CPU:-}
fi

if ! command -v python3 >/dev/null; then
    echo "load-stall: python3 is not installed: apt-get install python3" >&2
    exit 2
fi
if ! awk -v a="$AFTER" -v s="$STALL" -v d="$SECS" 'BEGIN {exit !(a >= 0 && s > 0 && a + s < d)}'; then
    echo "load-stall: AFTER=$AFTER STALL=$STALL SECS=$SECS: expected the stall to end inside the run (AFTER + STALL < SECS)" >&2
    exit 2
fi

need_smtlab

WORK=$(mktemp -d /tmp/smtlab-load-stall.XXXXXX)
SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# The server is bounded in time: it exits on its own LIFE seconds after it started.
LIFE=$(awk -v a="$AFTER" -v s="$STALL" -v d="$SECS" 'BEGIN {print a + s + d + 30}')
cat >"$WORK/server.py" <<'EOF'
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

stall_s, after_s, life_s = (float(a) for a in sys.argv[1:4])
body = b"stall-test\r\n"
# One write per response: with the head and the body apart, Nagle's algorithm and the
# client's delayed ACK would hold every body back ~40 ms.
response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
window = []  # [start, end] in time.monotonic(), fixed by the first request
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        now = time.monotonic()
        with lock:
            if not window:
                window.extend([now + after_s, now + after_s + stall_s])
        start, end = window
        if start <= now < end:
            # Every request that arrives during the stall is held to its end.
            time.sleep(end - now)
        self.wfile.write(response)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


server = Server(("127.0.0.1", 0), Handler)
threading.Timer(life_s, lambda: os._exit(0)).start()
print(server.server_address[1], flush=True)
server.serve_forever()
EOF

start_server() {
    local pin=()
    [ -n "$SERVER_CPU" ] && pin=(taskset -c "$SERVER_CPU")
    : >"$WORK/port"
    "${pin[@]}" python3 "$WORK/server.py" "$STALL" "$AFTER" "$LIFE" >"$WORK/port" 2>"$WORK/server.err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [ -s "$WORK/port" ] && break
        sleep 0.05
    done
    if [ ! -s "$WORK/port" ]; then
        echo "load-stall: the server did not come up: $(tail -1 "$WORK/server.err" 2>/dev/null)" >&2
        exit 2
    fi
    PORT=$(cat "$WORK/port")
}

# One load against a fresh server; writes its figures to file $1 as one line:
# requests p50_ms p90_ms p99_ms p999_ms max_ms over100ms (or errors:...). Not run in a
# subshell, so the EXIT trap always knows the server to stop.
run_load() {
    local to=$1
    shift
    start_server
    local pin=()
    [ -n "$CLIENT_CPU" ] && pin=(--cpus "$CLIENT_CPU")
    "$SMTLAB" load "http://127.0.0.1:$PORT/" -c "$CONNS" -d "$SECS" "${pin[@]}" "$@" --json >"$WORK/out.json" ||
        { echo "load-stall: smtlab load failed" >&2; exit 2; }
    stop_server
    python3 - "$WORK/out.json" >"$to" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
if any(d["errors"].values()):
    print("errors:%s" % d["errors"])
    sys.exit()
l = d["latency_ns"]
ms = [l[k] / 1e6 for k in ("p50", "p90", "p99", "p99_9", "max")]
print(d["requests"], *("%.2f" % v for v in ms), d["slower_than_ms"]["100"])
EOF
}

show() {
    local name=$1 requests=$2 p50=$3 p90=$4 p99=$5 p999=$6 max=$7 slow=$8
    printf '  %-28s %7d requests  p50 %8.2f  p90 %8.2f  p99 %8.2f  p99.9 %8.2f  max %8.2f ms  over 100 ms: %d (%.1f%%)\n' \
        "$name" "$requests" "$p50" "$p90" "$p99" "$p999" "$max" "$slow" \
        "$(awk -v s="$slow" -v n="$requests" 'BEGIN {print n ? 100 * s / n : 0}')"
}

echo "server: python3, stalls ${STALL} s from ${AFTER} s after its first request${SERVER_CPU:+, on CPU $SERVER_CPU}; smtlab load: $CONNS keep-alive connections, ${SECS} s${CLIENT_CPU:+, on CPU $CLIENT_CPU}"
run_load "$WORK/open" --rate "$RATE"
run_load "$WORK/closed"
OPEN=$(cat "$WORK/open")
CLOSED=$(cat "$WORK/closed")
for r in "$OPEN" "$CLOSED"; do
    case "$r" in errors:*) echo "load-stall: smtlab load reported $r" >&2; exit 2 ;; esac
done
# shellcheck disable=SC2086
show "open loop (--rate $RATE/s):" $OPEN
# shellcheck disable=SC2086
show "closed loop:" $CLOSED

read -r o_req o_p50 _ o_p99 _ o_max o_slow <<<"$OPEN"
read -r _ _ _ _ _ c_max c_slow <<<"$CLOSED"
status=0

# The open loop means something only if the server kept up outside the stall.
if ! awk -v n="$o_req" -v r="$RATE" -v d="$SECS" -v p="$o_p50" 'BEGIN {exit !(n >= 0.9 * r * d && p < 100)}'; then
    echo "load-stall: the server did not keep up with $RATE/s outside the stall ($o_req requests in ${SECS} s, p50 $o_p50 ms): try a lower RATE" >&2
    exit 2
fi
# Nor does either run if the stall did not happen inside it.
for m in "$o_max" "$c_max"; do
    if ! awk -v m="$m" -v s="$STALL" 'BEGIN {exit !(m >= 900 * s)}'; then
        echo "load-stall: a run's slowest request took $m ms: the ${STALL} s stall did not happen inside it" >&2
        exit 2
    fi
done

if awk -v s="$o_slow" -v n="$o_req" -v st="$STALL" -v d="$SECS" -v p="$o_p99" \
    'BEGIN {exit !(s / n >= 0.5 * st / d && p >= 500 * st)}'; then
    verdict="holds"
else
    verdict="does NOT hold"
    status=1
fi
awk -v s="$o_slow" -v n="$o_req" -v st="$STALL" -v d="$SECS" -v p="$o_p99" -v v="$verdict" 'BEGIN {
    printf "open loop: %.1f%% of requests over 100 ms (expected about STALL/SECS = %.1f%%, at least half of it) and p99 %.0f ms (expected >= %.0f ms): %s\n",
        100 * s / n, 100 * st / d, p, 500 * st, v }'
if [ "$c_slow" -le $((2 * CONNS)) ]; then verdict="holds"; else verdict="does not hold"; fi
echo "closed loop: $c_slow requests over 100 ms (expected about one per connection, $CONNS, at most $((2 * CONNS))): the stall hides in its percentiles: $verdict"
exit $status
