"""What an episode of a tool-use task (BFCL multi-turn) brings into the sandbox: the tool server and BFCL's API
simulators, the source files of the host's installed `bfcl-eval` wheel (the version `scripts/bootstrap.sh` pins),
so no framework image needs the wheel and its 32 unrelated dependencies (the simulators need only mpmath, in every
image: `AGENT_COMPUTE`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rootstep.benchmarks import reads_calls
from rootstep.model import Task

from ._drivers import _bfcl_tools

_TOOLS = Path(_bfcl_tools.__file__)
_PACKAGES = ("bfcl_eval", "bfcl_eval/eval_checker", "bfcl_eval/eval_checker/multi_turn_eval",
             "bfcl_eval/eval_checker/multi_turn_eval/func_source_code")


def _simulators() -> Path:
    from importlib.util import find_spec

    from .base import AdapterError

    spec = find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise AdapterError("BFCL tasks need the bfcl-eval wheel (scripts/bootstrap.sh installs it)")
    return Path(list(spec.submodule_search_locations)[0]) / "eval_checker" / "multi_turn_eval" / "func_source_code"


def tool_files(task: Task) -> dict[str, str]:
    """The files a tool-use episode needs besides the driver (none for other tasks): `_bfcl_tools.py`, and the
    simulators of the task's API classes as the package `bfcl_eval...func_source_code` they import themselves from."""
    if not reads_calls(task):
        return {}
    source = _simulators()
    modules = {"long_context", *(_bfcl_tools.MODULES[c] for c in task.metadata.get("involved_classes") or [])}
    files = {"_bfcl_tools.py": _TOOLS.read_text(encoding="utf-8")}
    files.update({f"{package}/__init__.py": "" for package in _PACKAGES})
    for module in sorted(modules):
        files[f"{_PACKAGES[-1]}/{module}.py"] = (source / f"{module}.py").read_text(encoding="utf-8")
    return files


def tool_files_digest(task: Task) -> str | None:
    """A hash of `tool_files(task)` (for the adapter's config hash), None for a task without tools."""
    files = tool_files(task)
    if not files:
        return None
    return hashlib.sha256("\0".join(f"{name}\0{text}" for name, text in sorted(files.items())).encode()).hexdigest()
