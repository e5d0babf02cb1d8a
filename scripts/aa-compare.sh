#!/usr/bin/env bash
# aa-compare.sh: an A/A comparison on this machine. Runs the same quick suite twice back
# to back into one store and compares the second run with the first (`smtlab compare`),
# printing the verdict, which between-run estimate compare used, and how many rows it
# called faster or slower. Nothing changed between the runs, so every row called
# different is noise that the between-run variance failed to hold.
#
# With PAIRS above 1 it does that again: the later pairs find the earlier runs in the
# store as repeats of the same setup, so they use the measured estimate ("stored repeats
# of this setup") instead of the default floor.
#
# Target: each pair says "no difference" overall and calls at most 5% of its steady
# rows faster or slower, in at least 19 of every 20 A/A pairs (every pair below 20).
# A pair whose runs `compare` finds in different environments (its
# `differs:` lines) is no A/A pair: it is printed with what differed and counted apart,
# neither meeting nor missing the target. The one exception is `cpu_handoff` alone (on a
# virtual machine, the host moving the vCPUs to CPUs that share differently between the
# runs): `compare` then holds back every row on two CPUs or more, and the pair is
# counted with the rows that are left.
#
# Usage: scripts/aa-compare.sh
# Environment:
#   SMTLAB=path      smtlab binary (default: $CARGO_TARGET_DIR or target, release, built
#                    if missing)
#   BENCH=list       benchmarks (default null-syscall,int-ops,read; `all` for the whole
#                    quick suite)
#   PLACEMENTS=list  placements (default: smtlab's)
#   PAIRS=n          A/A pairs (default 1)
#   DB=path          the store (default: a new one in a temporary directory, removed)
#   BETWEEN=choice   compare's --between-runs (default auto)
# Exit status: 0 if the target is met, 1 if not, 2 if smtlab fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BENCH=${BENCH:-null-syscall,int-ops,read}
PLACEMENTS=${PLACEMENTS:-}
PAIRS=${PAIRS:-1}
BETWEEN=${BETWEEN:-auto}

need_python3
need_smtlab

WORK=$(mktemp -d /tmp/smtlab-aa-compare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
DB=${DB:-$WORK/aa.db}

run_args=(run --suite quick --db "$DB")
[[ "$BENCH" != all ]] && run_args+=(--bench "$BENCH")
[[ -n "$PLACEMENTS" ]] && run_args+=(--placements "$PLACEMENTS")

# The id of the newest run in the store.
latest() {
    "$SMTLAB" runs --json --db "$DB" |
        python3 -c 'import json,sys; print(max(r["id"] for r in json.load(sys.stdin)))'
}

met=0 moved=0
for pair in $(seq 1 "$PAIRS"); do
    ids=()
    for side in A B; do
        start=$(date +%s)
        "$SMTLAB" "${run_args[@]}" >"$WORK/run.out" 2>&1 ||
            { tail -5 "$WORK/run.out" >&2; die "smtlab run failed (pair $pair, $side)"; }
        ids+=("$(latest)")
        echo "pair $pair: run $side = ${ids[-1]} ($(($(date +%s) - start)) s)"
    done
    "$SMTLAB" compare "${ids[0]}" "${ids[1]}" --db "$DB" --json --between-runs "$BETWEEN" \
        >"$WORK/cmp.json" || die "smtlab compare failed"
    status=0
    python3 - "$WORK/cmp.json" "$pair" <<'EOF' || status=$?
import json, sys

c = json.load(open(sys.argv[1]))
pair = sys.argv[2]
rows = c["rows"]
steady = [r for r in rows if not r.get("unsteady")]
flagged = [r for r in steady if r.get("significance") in ("faster", "slower")
           and (r.get("p_adjusted") or 1.0) <= 0.05]
o = c["overall"]
verdict = {"faster": "B faster", "slower": "B slower",
           "not_significant": "no difference"}.get(o.get("significance"), o.get("significance"))
b = c["between_runs"]
cells = ", ".join(f"{g} {100 * s:.1f}%" for g, s in sorted(b["cell_sd"].items()))
f3 = lambda x: "-" if x is None else f"{x:.3f}"
print(f"pair {pair}: overall: {verdict}: {f3(o['speedup'])}x "
      f"[{f3(o['ci95_low'])}, {f3(o['ci95_high'])}] ({o['rows']} rows)")
print(f"pair {pair}: between-run estimate: {b['source']}: cells {cells or '-'}, "
      f"whole run {100 * b['run_sd']:.1f}%")
scatter = c.get("between_runs_scatter")
if scatter is not None:
    print(f"pair {pair}: rows scatter {100 * scatter:.1f}% beyond their own intervals")
print(f"pair {pair}: flagged {len(flagged)} of {len(steady)} steady rows "
      f"({len(rows) - len(steady)} unsteady)")
for r in flagged:
    print(f"    {r['benchmark']} on {r['placement']}: {r['speedup']:.3f}x {r['significance']}")
ok = o.get("significance") == "not_significant" and len(flagged) * 20 <= len(steady)
diffs = c.get("env_diffs", [])
for d in diffs:
    what = "CPUs moved" if d["field"] == "cpu_handoff" else "not an A/A pair"
    print(f"pair {pair}: {what}: {d['field']} differs: {d['a']} | {d['b']}")
other = [d for d in diffs if d["field"] != "cpu_handoff"]
sys.exit(3 if other else 0 if ok else 1)
EOF
    case $status in
    0) met=$((met + 1)) ;;
    1) ;;
    3) moved=$((moved + 1)) ;;
    *) die "reading the comparison failed (pair $pair)" ;;
    esac
done
echo "aa-compare: $met of $((PAIRS - moved)) A/A pairs met the target (no difference, at" \
    "most 5% of steady rows flagged); $moved pairs ran in different environments"
# At least 19 of every 20: a pair may miss only once twenty or more were counted.
counted=$((PAIRS - moved))
if ((met * 20 >= counted * 19)); then
    echo "aa-compare: target met"
    exit 0
fi
echo "aa-compare: target missed"
exit 1
