#!/usr/bin/env bash
# Install rootstep (idempotently) and run the main job on its embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
SHARED=${ROOTSTEP_SHARED:-../shared}
.venv/bin/rootstep import whowhen "$SHARED/data/whowhen"
.venv/bin/rootstep stats
