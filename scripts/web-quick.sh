#!/usr/bin/env bash
# web-quick.sh: times the web workloads' quick settings on this machine, one run each:
#
#   smtlab bench web-static   --quick -p PLACEMENT --param server=S
#   smtlab bench web-capacity --quick -p PLACEMENT --param server=S
#
# for S in SERVERS. Target: each under 30 s. The placement must leave a client CPU
# (1c1t on a 2-CPU machine: server on CPU 0, load on CPU 1).
#
# Usage: scripts/web-quick.sh
# Environment:
#   SMTLAB=path      smtlab binary (default: target/release/smtlab, built if missing)
#   PLACEMENT=spec   default 1c1t
#   SERVERS="..."    default "event threads processes", plus nginx and the Apache MPMs
#                    where installed
#   LIMIT=s          seconds allowed per run (default 30)
# Exit status: 0 if every run finished within LIMIT, 1 if one did not, 2 if one failed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PLACEMENT=${PLACEMENT:-1c1t}
LIMIT=${LIMIT:-30}
need_smtlab
if [ -z "${SERVERS:-}" ]; then
    SERVERS="event threads processes"
    [ -x /usr/sbin/nginx ] && SERVERS="$SERVERS nginx"
    [ -x /usr/sbin/apache2 ] && SERVERS="$SERVERS apache-prefork apache-event"
fi

status=0
for bench in web-static web-capacity; do
    for server in $SERVERS; do
        start=$(date +%s.%N)
        if ! out=$("$SMTLAB" bench "$bench" --quick -p "$PLACEMENT" --param "server=$server" 2>&1); then
            echo "$bench server=$server failed: $(printf '%s\n' "$out" | tail -1)"
            status=2
            continue
        fi
        secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
        value=$(printf '%s\n' "$out" | awk -v p="$PLACEMENT" '$1 == p {print $3; exit}')
        ok=yes
        awk -v s="$secs" -v l="$LIMIT" 'BEGIN {exit !(s < l)}' || { ok=NO; [ $status = 0 ] && status=1; }
        printf '%-13s %-15s %8s s  (limit %s s: %s)  median %s\n' "$bench" "$server" "$secs" "$LIMIT" "$ok" "$value"
    done
done
exit $status
