"""The stage boundaries of DESIGN.md, checked on the source tree with Python's own parser.

A stage is a top-level folder with an `__init__.py` (as setup.py discovers them; `tests` aside), installed
as `rootstep.<folder>`. Two rules:
- no stage imports another stage's private module (`rootstep.adapters._images`) or a private name
  (`from rootstep.flows import _remote`): what other stages use is exported by the owning stage's
  `__init__`;
- the pipeline stages do not import each other in a cycle (imports inside functions and under
  `TYPE_CHECKING` count too: a lazy import is still a dependency). `rootstep/` itself, the CLI package
  that mounts every stage's commands, sits above the stages and is left out of the cycle check.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")
CLI_PACKAGE = "rootstep"


def _module_name(stage: str, path: Path) -> str:
    parts = list(path.relative_to(ROOT / stage).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["rootstep", *([stage] if stage != CLI_PACKAGE else []), *parts])


def _imports(stage: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) of every import in `path`, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = _module_name(stage, path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base, [alias.name for alias in node.names]))
    return found


def _stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "rootstep":
        return None
    if len(parts) > 1 and parts[1] in STAGES:
        return parts[1]
    return CLI_PACKAGE


def _inside(stage: str, module: str) -> list[str]:
    """The path components of `module` below its stage's package."""
    parts = module.split(".")[1:]
    return parts[1:] if stage != CLI_PACKAGE else parts


def _walk():
    for stage in STAGES:
        for path in sorted((ROOT / stage).rglob("*.py")):
            for line, module, names in _imports(stage, path):
                target = _stage_of(module)
                if target is not None and target != stage:
                    yield stage, path, line, target, module, names


def cross_stage_private_imports() -> list[str]:
    found = []
    for stage, path, line, target, module, names in _walk():
        private = [p for p in _inside(target, module) if p.startswith("_")]
        private += [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private:
            found.append(f"{path.relative_to(ROOT)}:{line}: {stage} imports {module} ({', '.join(private)})")
    return found


def stage_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {stage: set() for stage in STAGES if stage != CLI_PACKAGE}
    for stage, _path, _line, target, _module, _names in _walk():
        if CLI_PACKAGE not in (stage, target):
            graph[stage].add(target)
    cycles, seen = [], set()

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in trail:
                cycle = trail[trail.index(nxt):]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    cycles.append([*cycle, nxt])
            elif len(trail) < len(graph):
                visit(nxt, [*trail, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return cycles


def test_the_stages_are_the_top_level_packages():
    assert {"adapters", "annotation", "benchmarks", "flows", "gateway", "sandboxes", "tracers", "warehouse"} <= set(
        STAGES
    )


def test_no_stage_imports_another_stages_private_module():
    found = cross_stage_private_imports()
    assert found == [], "cross-stage private imports (export the name from the stage's __init__):\n" + "\n".join(found)


def test_no_import_cycle_between_stages():
    assert stage_cycles() == []


def test_the_checks_see_what_they_look_for(tmp_path):
    """The walker resolves relative imports and reads imports inside functions (a check that finds
    nothing because it reads nothing would pass on any tree)."""
    imports = _imports("flows", ROOT / "flows" / "annotate.py")
    modules = {module for _line, module, _names in imports}
    assert "rootstep.flows._runner" in modules  # `from ._runner import ...`
    assert "rootstep.annotation" in modules
    assert _stage_of("rootstep.gateway._server") == "gateway"
    assert _inside("gateway", "rootstep.gateway._server") == ["_server"]
