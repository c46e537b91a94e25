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


def _link_tree(tmp_path: Path) -> Path:
    """`rootstep.<stage>` -> the stage's folder, as mypy reads packages (it follows no editable-install finder)."""
    package = tmp_path / "rootstep"
    package.mkdir()
    for source in (ROOT / "rootstep").glob("*.py"):
        (package / source.name).symlink_to(source)
    for init in ROOT.glob("*/__init__.py"):
        if init.parent.name not in ("rootstep", "tests"):
            (package / init.parent.name).symlink_to(init.parent, target_is_directory=True)
    return tmp_path


def _mypy(tree: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental",
                           "--python-executable", sys.executable, *targets], cwd=tree, capture_output=True, text=True,
                          timeout=600)


def test_the_package_passes_mypy(tmp_path):
    """Every stage, the CLI and the UI type-check clean with the project's settings (`[tool.mypy]`; the in-container
    drivers excluded, as from ruff)."""
    done = _mypy(_link_tree(tmp_path), "-p", "rootstep")
    assert done.returncode == 0, f"mypy found problems:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout
    checked = int(done.stdout.split(" source files")[0].rsplit(" ", 1)[-1])
    assert checked >= 150, done.stdout  # every stage was read, not only the package root


def test_the_type_check_sees_a_wrong_type(tmp_path):
    """The same set-up reports a module whose call does not match the model's types (a check that reads nothing
    would pass any tree)."""
    tree = _link_tree(tmp_path)
    (tree / "rootstep" / "_probe.py").write_text(
        "from rootstep.model import Usage\n\nUsage(llm_calls='many')\n")
    done = _mypy(tree, "-m", "rootstep._probe")
    assert done.returncode == 1 and "rootstep/_probe.py:3: error" in done.stdout, done.stdout + done.stderr
