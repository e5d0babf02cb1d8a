#!/usr/bin/env bash
# estimate-vs-time.sh: holds `smtlab run --dry-run`'s (or `smtlab predict --dry-run`'s)
# time estimate against the measured wall time of the same run on this machine: the
# estimate ("about") should be within TOLERANCE of the run's wall time, and the run
# should take no longer than the bound ("at most").
#
# Usage: scripts/estimate-vs-time.sh [RUN ARGS...]    (default: --suite quick)
#        scripts/estimate-vs-time.sh predict [PREDICT ARGS...]
# Environment:
#   SMTLAB=path   smtlab binary (default: target/release/smtlab, built if missing)
#   TOLERANCE=f   accepted relative difference of estimate and wall time (default 0.25)
#   KEEP=dir      keep the plan, the timed output and the results database there
# Prints the estimate, the bound, the wall time and their ratio; then replays the live
# time left from the run's printed cell lines against the real time left
# (scripts/eta_replay.py; `run` only: predict shows no time left). Exit status: 0 when both are within the tolerance, 1 outside,
# 2 if smtlab fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
TOLERANCE=${TOLERANCE:-0.25}
need_smtlab
cmd=run
if [[ ${1:-} == predict ]]; then
    cmd=predict
    shift
fi
[[ $# -gt 0 || $cmd == predict ]] || set -- --suite quick

# `12.3 s`, `4m 10s` or `1h 02m` in seconds.
seconds() {
    awk -v t="$1" 'BEGIN {
        if (t ~ /h/) { split(t, a, /h */); sub(/m/, "", a[2]); print a[1] * 3600 + a[2] * 60 }
        else if (t ~ /m/) { split(t, a, /m */); sub(/s/, "", a[2]); print a[1] * 60 + a[2] }
        else { sub(/ *s/, "", t); print t + 0 } }'
}

if [[ -n ${KEEP:-} ]]; then
    tmp=$KEEP
    mkdir -p "$tmp"
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
fi
"$SMTLAB" "$cmd" "$@" --dry-run >"$tmp/plan.txt" 2>&1 || die "the dry run failed: $(tail -1 "$tmp/plan.txt")"
# The first `about X, at most Y` of the plan, its lines as one (a narrow terminal
# wraps them).
times=$(python3 -c 'import re, sys
m = re.search(r"about ([^,]+), at most ([^(),]+)", " ".join(sys.stdin.read().split()))
print(m.group(1).strip() + "|" + m.group(2).strip() if m else "")' <"$tmp/plan.txt")
[[ -n $times ]] || die "no time line in the dry run"
about=${times%|*}
most=${times#*|}
start=$(date +%s.%N)
# Each output line with the seconds since the start, for the replay of the time left.
python3 - "$tmp/run.txt" "$SMTLAB" "$cmd" "$@" --db "$tmp/results.db" <<'EOF' || die "the run failed: $(tail -1 "$tmp/run.txt")"
import subprocess, sys, time
t0 = time.monotonic()
with open(sys.argv[1], "w") as out:
    p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        out.write("%.3f %s" % (time.monotonic() - t0, line))
sys.exit(p.wait())
EOF
end=$(date +%s.%N)
awk -v a="$(seconds "$about")" -v m="$(seconds "$most")" -v s="$start" -v e="$end" -v tol="$TOLERANCE" 'BEGIN {
    w = e - s
    printf "estimate %.1f s, bound %.1f s, measured %.1f s: estimate/measured %.2f\n", a, m, w, a / w
    if (w > m) printf "the run took longer than its bound\n"
    exit ((a / w > 1 + tol || a / w < 1 - tol || w > m) ? 1 : 0) }' || status=1
if [[ $cmd == run ]]; then
    python3 "$ROOT/scripts/eta_replay.py" "$tmp/plan.txt" "$tmp/run.txt" "$TOLERANCE" || status=1
fi
exit "${status:-0}"
