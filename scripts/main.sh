#!/usr/bin/env bash
# Install rootstep (idempotently) and run the main job on its embedded defaults:
# import the shared Who&When corpus into ./rootstep-data and summarise it with SQL.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
SHARED_DATA=${ROOTSTEP_SHARED_DATA:-../shared/data}
RS=.venv/bin/rootstep
echo "[main] importing $SHARED_DATA/whowhen into ${ROOTSTEP_WAREHOUSE:-./rootstep-data}"
$RS import whowhen "$SHARED_DATA/whowhen"
$RS stats
echo "[main] decisive-step position by framework (SQL over the labels view):"
$RS sql "SELECT framework, count(*) AS labels, round(avg(step), 1) AS mean_step,
                median(step) AS median_step, count(DISTINCT agent) AS agents
         FROM labels GROUP BY framework ORDER BY framework"
echo "[main] explore further: .venv/bin/rootstep sql \"SELECT * FROM labels LIMIT 5\"; .venv/bin/rootstep show <run id>"
