#!/usr/bin/env bash
# Create or update the project's virtual environment in .venv, idempotently.
# The environment is keyed by a hash of its inputs (pyproject.toml, setup.py, requirements.lock, this
# script, and the list of stage folders, which the editable install maps one by one: a new stage needs a
# new install): when they have not changed, nothing is reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
UV_VERSION=0.13.9
BFCL_VERSION=2026.3.23
want=$( (cat pyproject.toml setup.py requirements.lock scripts/bootstrap.sh; ls -d */__init__.py) | sha256sum | cut -c1-16)
have=$(cat .venv/.rootstep-inputs 2>/dev/null || true)
if [ "$want" = "$have" ] && [ -x .venv/bin/rootstep ]; then
  echo "[bootstrap] .venv is up to date ($want)"
  exit 0
fi
echo "[bootstrap] building .venv (inputs $want); the first time takes a few minutes"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip setuptools wheel "uv==$UV_VERSION"
# uv installs the same pins (requirements.lock as constraints) with parallel downloads; pip is the fallback
if ! .venv/bin/python -m uv pip install --python .venv/bin/python -c requirements.lock -e '.[test]'; then
  echo "[bootstrap] uv could not install the environment; installing with pip"
  .venv/bin/python -m pip install --progress-bar on -c requirements.lock -e '.[test]'
fi
# BFCL's tasks, function documents and checker (benchmarks/_bfcl.py): its wheel pins 32 packages it needs only for
# model inference and leaderboards; the multi-turn checker and its simulators need only mpmath (in the lock)
.venv/bin/python -m uv pip install --python .venv/bin/python --no-deps "bfcl-eval==$BFCL_VERSION" \
  || .venv/bin/python -m pip install --no-deps "bfcl-eval==$BFCL_VERSION"
echo "$want" > .venv/.rootstep-inputs
echo "[bootstrap] .venv ready"
