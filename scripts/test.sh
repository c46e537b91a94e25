#!/usr/bin/env bash
# Install everything the tests need (idempotently) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/python -m pytest "$@"
