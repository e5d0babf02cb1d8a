"""Replays a run's live time left from its printed output (used by estimate-vs-time.sh).

Arguments: PLAN RUN TOLERANCE. PLAN is `smtlab run --dry-run`'s output (the table of
groups: cells printed, expected time); RUN is the same run's output with each line
prefixed by the seconds since its start. Each group's end (its last cell line) is fed to
the rule of crates/runner/src/eta.rs: the plan's time of the groups still to come,
scaled by (measured + prior) / (planned + prior) so far, the prior a tenth of the plan.
Prints the worst relative error of that time left against the real one from a third of
the run on; exit status 1 when it is over TOLERANCE.
"""

import os
import re
import sys

TIME = r"((?:\d+h )?(?:\d+m )?[\d.]+ ?s|(?:\d+h )?\d+m)"
PRIOR_SHARE = 0.1
# ETA_GROUPS=1: print each group's planned and measured time and the time left said and real.
VERBOSE = os.environ.get("ETA_GROUPS") == "1"


def seconds(text):
    total = 0.0
    for n, unit in re.findall(r"([\d.]+)\s*([hms])", text):
        total += float(n) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def plan_groups(path):
    """(cells printed, expected seconds) per group of the dry run's table."""
    row = re.compile(
        r"^\S+\s{2,}.*?\s(?:\d+/)?(\d+)\s+[\d-]+\s+(?:-|[\d.]+ \w+)\s+" + TIME + r"\s+" + TIME + r"\s*$"
    )
    groups = []
    for line in open(path, encoding="utf-8"):
        m = row.match(line)
        if m:
            groups.append((int(m.group(1)), seconds(m.group(2)), line.split()[0]))
    return groups


def cell_ends(path):
    """The time of each cell line (`NAME  PLACEMENT  params... median|skipped`) and of the last line.
    The cells end before the run's closing table of where its time went, whose rows look
    like cell lines."""
    ends, last, closing = [], 0.0, False
    for line in open(path, encoding="utf-8"):
        t, _, text = line.lstrip().partition(" ")
        last = float(t)
        closing = closing or "where it went and what it bought" in text
        if not closing and re.match(r"^[a-z0-9][\w.\u2026-]*\s+\S+\s{2,}\S", text):
            ends.append(last)
    return ends, last


def main():
    plan_path, run_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    groups = plan_groups(plan_path)
    ends, total = cell_ends(run_path)
    planned_cells = sum(g[0] for g in groups)
    if not groups or planned_cells != len(ends):
        print(f"time left: not replayed ({planned_cells} cells planned, {len(ends)} cell lines)")
        return 0
    planned = sum(g[1] for g in groups)
    prior = PRIOR_SHARE * planned
    done_planned, worst, worst_at, printed, before = 0.0, 0.0, None, 0, 0.0
    if VERBOSE:
        print("group               planned  measured  at      left said  left real")
    for n, s, name in groups:
        printed += n
        done_planned += s
        t = ends[printed - 1]
        left = (planned - done_planned) * (t + prior) / (done_planned + prior)
        real = total - t
        if VERBOSE:
            print(f"{name:<18} {s:8.1f} {t - before:9.1f} {t:7.0f} {left:10.1f} {real:10.1f}")
        before = t
        if t >= total / 3 and real > 1:
            err = abs(left / real - 1)
            if err > worst:
                worst, worst_at = err, t
    at = f" (at {worst_at:.0f} s)" if worst_at is not None else ""
    print(f"time left from a third of the run on: worst error {100 * worst:.0f}%{at}")
    return 1 if worst > tol else 0


if __name__ == "__main__":
    sys.exit(main())
