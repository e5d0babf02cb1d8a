#!/usr/bin/env bash
# fuzz-agent.sh: the agent protocol's property tests (remote::fuzz) with many more cases
# than the normal tests run: arbitrary and near-valid handshakes against a live agent,
# the line reader against arbitrary chunks, the report checks against arbitrary counts.
# A failing case is kept under crates/loadgen/proptest-regressions/ (commit it).
#
# Usage: scripts/fuzz-agent.sh [CASES]   (default 5000 per property)
set -euo pipefail
cd "$(dirname "$0")/.."
PROPTEST_CASES="${1:-5000}" exec cargo test -p smtlab-loadgen --lib remote::fuzz -- --nocapture
