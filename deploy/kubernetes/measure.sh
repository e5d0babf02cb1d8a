#!/bin/sh
# The measuring step of the Kubernetes manifests, run in the image (as
# /usr/local/bin/smtlab-measure): measures into the node's results file unless this
# round was measured already, and resumes a run a stopped pod left unfinished, measuring
# only its missing cells. The push is a separate step, so a failed push is retried
# without measuring again.
#   SMTLAB_DB      the node's results file (on a volume that outlives the pod)
#   SMTLAB_ARGS    what to measure (default: run --suite quick)
#   SMTLAB_TIMEOUT_S  how long one attempt may measure (default 3600)
set -eu
db=${SMTLAB_DB:?set SMTLAB_DB to the results file}
args=${SMTLAB_ARGS:-run --suite quick}
limit=${SMTLAB_TIMEOUT_S:-3600}
mkdir -p "$(dirname "$db")"
runs=$(smtlab runs --json --db "$db" 2>/dev/null || true)
if printf '%s' "$runs" | grep -Eq '"status": *"(interrupted|running)"'; then
  echo "resuming the unfinished run in $db"
  exec timeout --signal=INT --kill-after=60 "$limit" smtlab run --resume --db "$db"
elif printf '%s' "$runs" | grep -Eq '"status": *"finished"'; then
  echo "$db already holds this round's run; nothing to measure"
else
  # $args split into words on purpose: it is a command line.
  # shellcheck disable=SC2086
  exec timeout --signal=INT --kill-after=60 "$limit" smtlab $args --db "$db"
fi
