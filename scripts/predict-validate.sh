#!/usr/bin/env bash
# predict-validate.sh: holds `smtlab predict --validate` against its targets on this
# machine: the model's mean absolute error at most half the better naive baseline's and
# at most 3 points, and the direction (slower beyond 5% or not) right on at least 90% of
# the held-out pairs whose measured slowdown differs from 1 by 5% or more.
#
# The workloads are none of the rulers (a pair with a ruler is measured by the profiles,
# not predicted), memory-bound ones among them: a write stream, a copy stream and a
# chase over 4x the last-level cache, two AIM9 arithmetic loops, stat(2), and four
# commands over an 8 MiB file (gzip, sha256sum, sort, xz). Ten workloads make 55 pairs;
# 24 are held out and 16 fitted on.
#
# Usage: scripts/predict-validate.sh [PREDICT ARGS...]   (e.g. --forms cores, --quick)
# Environment:
#   SMTLAB=path   smtlab binary (default: target/release/smtlab, built if missing)
#   DB=path       results database (default: a temporary one)
#   VALIDATE=n    held-out pairs (default 24); TRAIN=n training pairs (default 16)
# Prints the validation of each form. Exit status: 0 every form meets the targets, 1 one
# does not, 2 if smtlab fails.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need_smtlab
need_python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DB=${DB:-$tmp/predict.db}
head -c $((6 << 20)) /dev/urandom | base64 >"$tmp/data"

"$SMTLAB" predict mem-write mem-copy mem-latency aim-add-double aim-add-long stat \
    --cmd "gzip=gzip -c $tmp/data >/dev/null" \
    --cmd "sha256=sha256sum $tmp/data >/dev/null" \
    --cmd "sort=sort $tmp/data >/dev/null" \
    --cmd "xz=xz -1 -c $tmp/data >/dev/null" \
    --validate "${VALIDATE:-24}" --train "${TRAIN:-16}" --json --db "$DB" "$@" >"$tmp/profile.json" ||
    die "smtlab predict failed"

python3 - "$tmp/profile.json" <<'EOF'
import json, sys

doc = json.load(open(sys.argv[1]))
ok = True
for v in doc["validation"]:
    m, none, mean = v["model"], v["no_interference"], v["mean_slowdown"]
    better = min(none["mae_points"], mean["mae_points"])
    error_ok = m["mae_points"] <= min(better / 2, 3.0)
    right = m["direction_right_differing"]
    direction_ok = right is None or right >= 0.9
    shown = "-" if right is None else f'{right:.0%} of {m["differing"]}'
    print(f'{v["form"]}: {m["pairs"]} held-out pairs, model error {m["mae_points"]:.2f} points '
          f'(no interference {none["mae_points"]:.2f}, mean slowdown {mean["mae_points"]:.2f}); '
          f'direction right on {m["direction_right"]:.0%}, on pairs differing by 5%+: '
          f'{shown}')
    bare = sum(1 for c in v["checked"] if c.get("predicted") is None)
    if bare:
        print(f'  {bare} of {len(v["checked"])} held-out ordered pairs got no figure (scored as 1)')
    print(f'  error target (at most half of {better:.2f} and 3 points): {"met" if error_ok else "NOT met"}; '
          f'direction target (90%): {"met" if direction_ok else "NOT met"}')
    ok = ok and error_ok and direction_ok
if not doc["validation"]:
    print("no form could be validated: " + "; ".join(
        m.get("not_fitted") or "held-out pairs held back" for m in doc["models"]))
    ok = False
print(f'{len(doc["held_back"])} pairs held back')
sys.exit(0 if ok else 1)
EOF
