"""The source tree passes ruff with the project's rule set (pyproject.toml, `[tool.ruff]`): pyflakes' errors
(unused and undefined names, imports not at the top) and bugbear's likely bugs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"ruff check found problems:\n{done.stdout}{done.stderr}"
