#!/usr/bin/env bash
# repeat-and-time.sh: runs every benchmark twice back to back at default settings and
# reports (1) whether the two medians agree within 3% and (2) how long each run took
# (target: under 10 s each); then times the whole catalog in quick mode (target: under
# 2 minutes).
#
# Single-thread benchmarks run on 1c1t; those that need two CPUs (a holder and a waiter,
# or a pair to bounce a line between) on 2c1t.
#
# Usage: scripts/repeat-and-time.sh [BENCH ...]     (default: the whole catalog)
# Environment:
#   SMTLAB=path   smtlab binary (default: target/release/smtlab, built if missing)
#   TOLERANCE=f   accepted relative difference of the two medians (default 0.03)
# Exit status: 0 if every benchmark repeats within the tolerance and every time target
# holds, 1 otherwise, 2 if smtlab fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
TOLERANCE=${TOLERANCE:-0.03}
TWO_CPU="mutex-handoff condvar-signal condvar-broadcast c2c-latency"

need_smtlab

if [[ $# -gt 0 ]]; then
    BENCHES=("$@")
else
    mapfile -t BENCHES < <("$SMTLAB" list --json | python3 -c 'import json,sys; [print(b["name"]) for b in json.load(sys.stdin)]')
fi

now() { date +%s.%N; }

# "median seconds" of one run.
run_once() {
    local bench=$1 placement=$2 t0 out
    t0=$(now)
    out=$("$SMTLAB" bench "$bench" --placement "$placement" --json) || die "smtlab bench $bench failed"
    python3 -c 'import json,sys; print(json.load(sys.stdin)["cells"][0]["result"]["summary"]["median"], end=" ")' <<<"$out"
    python3 -c "print($(now) - $t0)"
}

ROWS=""
for b in "${BENCHES[@]}"; do
    p=1c1t
    [[ " $TWO_CPU " == *" $b "* ]] && p=2c1t
    read -r m1 t1 < <(run_once "$b" "$p")
    read -r m2 t2 < <(run_once "$b" "$p")
    ROWS+="$b $p $m1 $m2 $t1 $t2"$'\n'
done

t0=$(now)
"$SMTLAB" bench all --quick -p 1c1t -p 2c1t >/dev/null 2>&1 || die "smtlab bench all --quick failed"
QUICK_S=$(python3 -c "print($(now) - $t0)")

python3 - "$TOLERANCE" "$QUICK_S" <<PY
import sys
tol, quick_s = float(sys.argv[1]), float(sys.argv[2])
print(f"{'benchmark':<18} {'placement':<9} {'median 1':>12} {'median 2':>12} {'diff':>7}  {'run 1 s':>7} {'run 2 s':>7}")
bad = 0
for line in """$ROWS""".strip().splitlines():
    b, p, m1, m2, t1, t2 = line.split()
    m1, m2, t1, t2 = map(float, (m1, m2, t1, t2))
    diff = abs(m2 - m1) / m1 if m1 else float("inf")
    slow = max(t1, t2) > 10
    bad += diff > tol or slow
    flag = ("" if diff <= tol else " >tol") + (" >10s" if slow else "")
    print(f"{b:<18} {p:<9} {m1:>12.4g} {m2:>12.4g} {diff:>7.1%}  {t1:>7.1f} {t2:>7.1f}{flag}")
print(f"\nwhole catalog, --quick, 1c1t and 2c1t: {quick_s:.1f} s (target < 120 s)")
bad += quick_s > 120
sys.exit(1 if bad else 0)
PY
