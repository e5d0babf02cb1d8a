#!/usr/bin/env bash
# Times `smtlab fleet` over 1,000 made-up hosts with 1 and with 10 runs per host, in
# SQLite and in PostgreSQL (a throw-away cluster in a temporary directory, stopped on
# exit), and prints wall time and peak memory (/usr/bin/time) per store.
#
#   scripts/fleet-scale.sh [HOSTS]        (default 1000)
#
# Builds the smtlab binary and the fleet_store example first, in the debug profile, or
# optimised with PROFILE=release (the figures a user sees). Needs sqlite3, psql, initdb
# and pg_ctl on PATH for the PostgreSQL rows (skipped without).
set -euo pipefail
hosts=${1:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
profile=${PROFILE:-debug}
case "$profile" in
    debug) cargo build -q -p smtlab --bin smtlab --example fleet_store ;;
    release) cargo build -q --release -p smtlab --bin smtlab --example fleet_store ;;
    *) echo "PROFILE=$profile: expected debug or release" >&2; exit 2 ;;
esac
smtlab=$target/$profile/smtlab
work=$(mktemp -d)
pgdata=$work/pg
as=()
cleanup() {
    if [ -f "$pgdata/postmaster.pid" ]; then
        "${as[@]}" pg_ctl -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "building $hosts hosts x 1 run (SQLite)..." >&2
"$target/$profile/examples/fleet_store" "$work/x1.db" "$hosts"
cp "$work/x1.db" "$work/x10.db"
echo "copying each run 9 times (SQLite)..." >&2
sed 's/COPIES/10/g' "$root/scripts/fleet-scale.sql" | sqlite3 "$work/x10.db"

rows=()
measure() { # name db
    local out
    out=$( { /usr/bin/time -f "%e %M" "$smtlab" fleet --json --db "$2" >/dev/null; } 2>&1 | tail -1)
    local runs
    runs=$(case "$2" in
        postgresql://*) psql -At -d "$2" -c "SELECT count(*) FROM smtlab.runs" ;;
        *) sqlite3 "$2" "SELECT count(*) FROM runs" ;;
    esac)
    rows+=("$(printf '%-12s %6s %7s %8s %9.0f' "$1" "$hosts" "$runs" "${out% *}" "$(( ${out#* } / 1024 ))")")
}
measure "sqlite x1" "$work/x1.db"
measure "sqlite x10" "$work/x10.db"

if command -v initdb >/dev/null && command -v pg_ctl >/dev/null && command -v psql >/dev/null; then
    echo "starting a throw-away PostgreSQL..." >&2
    # PostgreSQL refuses to run as root: then the cluster is the postgres user's.
    as=()
    if [ "$(id -u)" = 0 ]; then
        as=(runuser -u postgres --)
        chmod 755 "$work"
        mkdir "$pgdata" && chown postgres "$pgdata" "$work"
    fi
    "${as[@]}" initdb -D "$pgdata" -U smtlab -A trust >/dev/null
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "${as[@]}" pg_ctl -D "$pgdata" -l "$work/pg.log" -w \
        -o "-p $port -k $work -c listen_addresses='' -c fsync=off -c synchronous_commit=off" start >/dev/null
    sock=${work//\//%2F}
    psql -q -h "$work" -p "$port" -U smtlab -d postgres -c "CREATE DATABASE x1"
    base="postgresql://smtlab@$sock:$port"
    echo "pushing $hosts runs into PostgreSQL..." >&2
    "$smtlab" push "$work/x1.db" --to "$base/x1" >/dev/null
    psql -q -d "$base/x1" -c "VACUUM ANALYZE"
    # x10: a copy of x1 (its template) whose runs are then copied 9 times.
    psql -q -d "$base/postgres" -c "CREATE DATABASE x10 TEMPLATE x1"
    echo "copying each run 9 times (PostgreSQL)..." >&2
    { echo "SET search_path TO smtlab;"; sed "s/COPIES/10/g" "$root/scripts/fleet-scale.sql"; } |
        psql -q -v ON_ERROR_STOP=1 -d "$base/x10"
    psql -q -d "$base/x10" -c "VACUUM ANALYZE"
    if [ -n "${FLEET_SCALE_KEEP:-}" ]; then
        echo "kept: $base/x1 and $base/x10 (data $pgdata); press Enter to stop" >&2
        read -r _ || true
    fi
    measure "postgres x1" "$base/x1"
    measure "postgres x10" "$base/x10"
fi

printf '%-12s %6s %7s %8s %9s\n' store hosts runs wall_s max_MiB
printf '%s\n' "${rows[@]}"
