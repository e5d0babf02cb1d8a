#!/usr/bin/env bash
# oltp-pg-tps.sh: runs `smtlab bench oltp-pg` and shows, for every sample, smtlab's value
# beside the TPS pgbench printed for that run (the metric pgbench_tps), with pgbench's
# latencies. The two must agree to the last printed digit: smtlab's figure is
# pgbench's, not a re-computation.
#
# Usage: scripts/oltp-pg-tps.sh [PLACEMENT] [KEY=VALUE ...]   (default placement 1c1t)
# Environment:
#   SMTLAB=path   smtlab binary (default: target/release/smtlab, built if missing)
# Exit status: 0 when every sample agrees, 1 when one does not, 2 when it cannot run.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PLACEMENT=${1:-1c1t}
shift || true

need_smtlab
need_python3

args=()
for kv in "$@"; do args+=(--param "$kv"); done
json=$("$SMTLAB" bench oltp-pg -p "$PLACEMENT" "${args[@]}" --json) || die "smtlab bench oltp-pg failed"

python3 - "$json" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
if not doc.get("cells"):
    print("no cell measured:", doc.get("skipped"))
    sys.exit(2)
bad = 0
for cell in doc["cells"]:
    r = cell["result"]
    print(f"{cell['placement']['name']} cpus {cell['placement']['cpus']}  params {cell['params']}")
    print(f"{'sample':>6} {'smtlab tps':>14} {'pgbench tps':>14} {'lat avg ms':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for i, s in enumerate(r["samples"]):
        m = s.get("metrics", {})
        pg = m.get("pgbench_tps")
        same = pg is not None and f"{s['value']:.6f}" == f"{pg:.6f}"
        bad += not same
        print(f"{i:>6} {s['value']:>14.6f} {pg if pg is not None else float('nan'):>14.6f} "
              f"{m.get('latency_avg_ms', float('nan')):>10.3f} {m.get('latency_p50_ms', float('nan')):>8.3f} "
              f"{m.get('latency_p99_ms', float('nan')):>8.3f}{'' if same else '  DIFFERS'}")
    sm = r["summary"]
    print(f"mean {sm['mean']:.1f} tps +- {sm['ci95_half_width']:.1f} (95% CI, n={sm['n']})")
sys.exit(1 if bad else 0)
PY
