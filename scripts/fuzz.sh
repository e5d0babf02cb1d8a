#!/usr/bin/env bash
# fuzz.sh: every fuzzing target's property tests with many more cases than the normal
# tests run, then the seed corpus of each replayed:
#   - the agent protocol (loadgen remote::fuzz): arbitrary and near-valid handshakes
#     against a live agent, the line reader, the report checks; corpus/agent/
#   - the load generator's response parser (loadgen http): arbitrary bytes split
#     anywhere; corpus/http-response/
#   - the built-in servers' request parser (workloads web::request): arbitrary bytes,
#     well-formed requests and every prefix of them; corpus/http-request/
# Seeds are files named CLASS.NAME, CLASS the answer each must get (docs/security.md).
# A failing case is kept under crates/*/proptest-regressions/ (commit it).
#
# Usage: scripts/fuzz.sh [CASES]   (default 5000 per property)
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-5000}"
case "$cases" in
'' | *[!0-9]*)
    echo "fuzz.sh: CASES $cases: expected a whole number of cases per property" >&2
    exit 2
    ;;
esac
export PROPTEST_CASES="$cases"
# The filters pick the property tests and the corpus replays together.
cargo test -p smtlab-loadgen --lib -- remote::fuzz http::tests
cargo test -p smtlab-workloads --lib -- web::request::tests
