#!/usr/bin/env bash
# ratio-stability.sh: how far a ratio between two placements can be trusted on this
# machine. Measures an A/A pair (1c1t against cpus=<the same CPU>, identical by
# construction, so every departure of their ratio from 1 is the machine's drift or the
# benchmark instance's luck) several times: once with the two cells one after the other,
# once interleaved (--interleave), once with --repeat rounds. Prints each ratio and the
# worst departure from 1 per mode.
#
# Usage: scripts/ratio-stability.sh [BENCH ...]   (default: null-syscall pipe-latency mem-read)
# Environment:
#   SMTLAB=path   smtlab binary (default: target/release/smtlab, built if missing)
#   TRIALS=n      measurements per mode (default 6)
#   ROUNDS=n      rounds of the --repeat mode (default 3)
# Exit status: 0 when it measured, 2 if smtlab fails. It judges nothing: it reports.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
TRIALS=${TRIALS:-6}
ROUNDS=${ROUNDS:-3}

need_smtlab
need_python3

if [[ $# -gt 0 ]]; then
    BENCHES=("$@")
else
    BENCHES=(null-syscall pipe-latency mem-read)
fi

# The CPU 1c1t takes, so the second placement is the same CPU named differently.
CPU=$("$SMTLAB" placements --json 1c1t | python3 -c 'import json,sys; print(json.load(sys.stdin)["placements"][0]["placement"]["cpus"][0])') ||
    die "smtlab placements failed"

ratio_of() {
    python3 -c 'import json,sys; print(json.load(sys.stdin)["comparisons"][0]["ratio"])'
}

printf '%-14s %-22s %s\n' benchmark mode "ratios (cpus=$CPU / 1c1t), worst |ratio - 1|"
for b in "${BENCHES[@]}"; do
    for mode in "one after the other" "--interleave" "--repeat $ROUNDS"; do
        case $mode in
            --interleave) extra=(--interleave) ;;
            --repeat*) extra=(--repeat "$ROUNDS") ;;
            *) extra=() ;;
        esac
        ratios=()
        for ((i = 0; i < TRIALS; i++)); do
            out=$("$SMTLAB" bench "$b" -p 1c1t -p "cpus=$CPU" "${extra[@]}" --json) ||
                die "smtlab bench $b ${extra[*]} failed"
            ratios+=("$(ratio_of <<<"$out")")
        done
        python3 - "$b" "$mode" "${ratios[@]}" <<'PY'
import sys
b, mode, rs = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3:]]
worst = max(abs(r - 1) for r in rs)
print(f"{b:<14} {mode:<22} {' '.join(f'{r:.3f}' for r in rs)}   worst {worst:.1%}")
PY
    done
done
