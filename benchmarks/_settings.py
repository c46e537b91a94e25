"""Where benchmark data lives: the shared data folder and the user registry of added benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """`$ROOTSTEP_SHARED_DATA`, else `<repo>/../shared/data` (read-only benchmark files)."""
    env = os.environ.get("ROOTSTEP_SHARED_DATA")
    return Path(env).expanduser() if env else REPO_ROOT.parent / "shared" / "data"


def user_registry_dir() -> Path:
    """Where `rootstep benchmark add` copies benchmarks.

    `$ROOTSTEP_BENCHMARKS_DIR`; else `<warehouse>/benchmarks` when `$ROOTSTEP_WAREHOUSE` is a local
    path; else `$XDG_DATA_HOME/rootstep/benchmarks` (default `~/.local/share/rootstep/benchmarks`).
    """
    env = os.environ.get("ROOTSTEP_BENCHMARKS_DIR")
    if env:
        return Path(env).expanduser()
    warehouse = os.environ.get("ROOTSTEP_WAREHOUSE")
    if warehouse and "://" not in warehouse:
        return Path(warehouse).expanduser() / "benchmarks"
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "rootstep" / "benchmarks"
