#!/usr/bin/env bash
# Install everything the tests need (idempotently) and run the whole test suite.
# The tests run in ROOTSTEP_TEST_WORKERS processes (default 2; pytest-xdist, one test module per worker at a
# time, so module fixtures are set up once): most tests wait on containers, servers and subprocesses, and one
# process left a core of a 2-core machine idle half the time. Arguments go to pytest (`-n 0`: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/sandbox-prereqs.sh
scripts/browser-prereqs.sh
.venv/bin/rootstep sandbox build --skip-if-no-docker
.venv/bin/rootstep frameworks build --skip-if-no-docker
.venv/bin/python -m pytest -n "${ROOTSTEP_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
