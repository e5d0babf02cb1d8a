#!/usr/bin/env bash
# whole-machine-cv.sh: how much a whole-machine cell (`cores`, `all`) spreads inside
# `smtlab run` against the same cell under `smtlab bench`, with what disturbed each.
#
# TRIALS times, in turn: `bench BENCH -p PLACEMENT` (the default preset), `bench BENCH
# -p PLACEMENT --quick`, and `run --suite quick --bench RUN_BENCHES --placements
# RUN_PLACEMENTS` in a fresh database; each prints the coefficient of variation (sample
# standard deviation / mean) of every cell of BENCH on PLACEMENT, its sample count, and
# what disturbed it (steal, other processes and smtlab's own other threads, each a share
# of the cell's CPU time; `-` where not recorded). A cell marked disturbed is counted
# apart: its spread is someone else's load. At the end, per form, the median CV over the
# trials whose cell was not disturbed, and the ratio run / bench.
#
# Usage: scripts/whole-machine-cv.sh        (from anywhere; needs python3)
# Environment:
#   SMTLAB=path          smtlab binary (default: target/release/smtlab, built if missing)
#   BENCH=name           benchmark to follow (default int-ops)
#   PLACEMENT=spec       placement to follow (default cores)
#   RUN_BENCHES=list     what `run` measures (default int-ops,fp-ops)
#   RUN_PLACEMENTS=list  placements of `run` (default cores,all)
#   TRIALS=n             rounds of the three forms (default 5)
#   WRAP=cmd             a command put before every smtlab (e.g. `nice -n -20`)
# Exit status: 0, or 2 if a tool is missing or smtlab fails.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
SMTLAB="${SMTLAB:-$root/target/release/smtlab}"
BENCH="${BENCH:-int-ops}"
PLACEMENT="${PLACEMENT:-cores}"
RUN_BENCHES="${RUN_BENCHES:-int-ops,fp-ops}"
RUN_PLACEMENTS="${RUN_PLACEMENTS:-cores,all}"
TRIALS="${TRIALS:-5}"
WRAP="${WRAP:-}"

command -v python3 >/dev/null || { echo "whole-machine-cv.sh: python3 is needed" >&2; exit 2; }
if [[ ! -x "$SMTLAB" ]]; then
    (cd "$root" && cargo build --release -p smtlab) || exit 2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One line per cell of BENCH on PLACEMENT in a results JSON: form, CV %, n, disturbed
# (0/1), steal %, other processes %, smtlab other %.
cells() {
    python3 - "$1" "$2" "$BENCH" "$PLACEMENT" <<'EOF'
import json, sys
path, form, bench, placement = sys.argv[1:5]
doc = json.load(open(path))
for c in doc["cells"]:
    if c["benchmark"] != bench or c["placement"]["name"] != placement:
        continue
    s, d = c["result"]["summary"], c["result"].get("disturbance")
    cv = 100 * s["stddev"] / s["mean"] if s["mean"] else float("nan")
    pct = lambda k: "-"
    disturbed = 0
    if d and d["window_ns"] * d["cpus"] > 0:
        cpu = d["window_ns"] * d["cpus"]
        pct = lambda k: "-" if d.get(k) is None else "%.1f" % (100 * d[k] / cpu)
        floor = max(0.02 * cpu, d["tick_ns"] * (d["windows"] * d["cpus"]) ** 0.5)
        disturbed = int(d["steal_ns"] > floor or (d.get("foreign_ns") or 0) > floor)
    print(f"{form} {cv:.2f} {s['n']} {disturbed} {pct('steal_ns')} {pct('foreign_ns')} {pct('smtlab_other_ns')}")
EOF
}

lines="$work/lines"
: >"$lines"
printf '%-6s %-11s %7s %3s %9s %6s %8s %13s\n' trial form CV% n disturbed steal% others% smtlab-other%
for t in $(seq 1 "$TRIALS"); do
    $WRAP "$SMTLAB" bench "$BENCH" -p "$PLACEMENT" --json -q >"$work/b.json" || exit 2
    $WRAP "$SMTLAB" bench "$BENCH" -p "$PLACEMENT" --quick --json -q >"$work/bq.json" || exit 2
    rm -f "$work/r.db"
    $WRAP "$SMTLAB" run --suite quick --bench "$RUN_BENCHES" --placements "$RUN_PLACEMENTS" \
        --json -q --db "$work/r.db" >"$work/r.json" || exit 2
    for f in "b bench" "bq bench-quick" "r run-quick"; do
        set -- $f
        cells "$work/$1.json" "$2" | while read -r form cv n dist st fo so; do
            printf '%-6s %-11s %7s %3s %9s %6s %8s %13s\n' "$t" "$form" "$cv" "$n" "$dist" "$st" "$fo" "$so"
            echo "$form $cv $dist" >>"$lines"
        done
    done
done
python3 - "$lines" <<'EOF'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    form, cv, dist = line.split()
    by.setdefault(form, []).append((float(cv), dist == "1"))
print()
med = {}
for form, rows in by.items():
    quiet = [cv for cv, d in rows if not d]
    med[form] = statistics.median(quiet) if quiet else float("nan")
    print(f"{form:12} median CV {med[form]:6.2f}% over {len(quiet)} undisturbed of {len(rows)} trials")
for a, b in (("run-quick", "bench"), ("run-quick", "bench-quick")):
    if a in med and b in med and med[b] > 0:
        print(f"{a} / {b}: {med[a] / med[b]:.2f}x")
EOF
