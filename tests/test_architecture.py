"""The stage boundaries of DESIGN.md, checked on the source tree with Python's own parser.

A stage is a top-level folder with an `__init__.py` (as setup.py discovers them; `tests` aside), installed
as `rootstep.<folder>`. Two rules:
- no stage imports another stage's private module (`rootstep.adapters._images`) or a private name
  (`from rootstep.flows import _remote`): what other stages use is exported by the owning stage's
  `__init__`;
- the stages do not import each other in a cycle (imports inside functions and under `TYPE_CHECKING` count
  too: a lazy import is still a dependency).
And three floors:
- `model/`, the bottom, imports no other stage and nothing but the standard library and pydantic;
- the annotation core is pure: of the other stages it imports only `model`, `benchmarks` (answers, verifiers)
  and `prompts`, never an adapter, a tracer, the gateway, the warehouse or the flows;
- the roof is `rootstep/` (the CLI package) with each stage's commands (its `cli.py` modules, mounted by
  `rootstep.cli`) and `ui/`: no stage imports the roof, so the cycle check needs no exemption for it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")
CLI_PACKAGE = "rootstep"
BOTTOM = "model"
ROOF = "roof"
"""A node of the cycle check: the CLI package, the UI and every stage's commands (`cli.py` modules)."""


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


def floor_of(stage: str, path: Path) -> str:
    """The node of `path` in the cycle check: `ROOF` for the CLI package, the UI and a stage's commands."""
    if stage in (CLI_PACKAGE, "ui") or path.name == "cli.py":
        return ROOF
    return stage


def floor_of_module(module: str) -> str | None:
    stage = _stage_of(module)
    if stage is None:
        return None
    if stage in (CLI_PACKAGE, "ui") or module.rsplit(".", 1)[-1] == "cli":
        return ROOF
    return stage


def _edges():
    """(from node, to node, where) of every import between two different nodes, the CLI package included."""
    for stage in [*STAGES]:
        for path in sorted((ROOT / stage).rglob("*.py")):
            source = floor_of(stage, path)
            for line, module, _names in _imports(stage, path):
                target = floor_of_module(module)
                if target is not None and target != source:
                    yield source, target, f"{path.relative_to(ROOT)}:{line}: imports {module}"


def imports_of_the_roof() -> list[str]:
    """Imports of the CLI package, the UI or a stage's commands by a stage's own modules."""
    return sorted(where for source, target, where in _edges() if target == ROOF)


def imports_of_the_bottom_floor() -> list[str]:
    """What `model/` imports beyond the standard library, pydantic and itself."""
    found = []
    for path in sorted((ROOT / BOTTOM).rglob("*.py")):
        for line, module, _names in _imports(BOTTOM, path):
            top = module.split(".")[0]
            inside = module == f"rootstep.{BOTTOM}" or module.startswith(f"rootstep.{BOTTOM}.")
            if not inside and top not in sys.stdlib_module_names and top not in ("pydantic", "__future__"):
                found.append(f"{path.relative_to(ROOT)}:{line}: imports {module}")
    return found


PURE_CORE = {"annotation": {"model", "benchmarks", "prompts"}}
"""Stages whose imports of other stages are limited to these."""


def impure_imports() -> list[str]:
    return sorted(where for source, target, where in _edges()
                  if source in PURE_CORE and target not in PURE_CORE[source])


def stage_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {node: set() for node in [*STAGES, ROOF] if node not in (CLI_PACKAGE, "ui")}
    for source, target, _where in _edges():
        graph[source].add(target)
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
    assert {"adapters", "annotation", "benchmarks", "flows", "gateway", "model", "sandboxes", "tracers",
            "warehouse"} <= set(STAGES)


def test_no_stage_imports_another_stages_private_module():
    found = cross_stage_private_imports()
    assert found == [], "cross-stage private imports (export the name from the stage's __init__):\n" + "\n".join(found)


def test_no_import_cycle_between_stages():
    assert stage_cycles() == []


def test_no_stage_imports_the_cli_or_the_ui():
    found = imports_of_the_roof()
    assert found == [], "a stage imports the roof (move what it needs down to its stage or to rootstep.model):\n" + \
        "\n".join(found)


def test_the_annotation_core_imports_no_adapter_tracer_gateway_warehouse_or_flow():
    found = impure_imports()
    assert found == [], "the annotation core imports beyond model, benchmarks and prompts:\n" + "\n".join(found)


def test_the_bottom_floor_imports_only_the_standard_library_and_pydantic():
    found = imports_of_the_bottom_floor()
    assert found == [], "rootstep.model imports beyond the standard library and pydantic:\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for(tmp_path):
    """The walker resolves relative imports and reads imports inside functions (a check that finds
    nothing because it reads nothing would pass on any tree)."""
    imports = _imports("flows", ROOT / "flows" / "annotate.py")
    modules = {module for _line, module, _names in imports}
    assert "rootstep.flows._runner" in modules  # `from ._runner import ...`
    assert "rootstep.annotation" in modules
    assert _stage_of("rootstep.gateway._server") == "gateway"
    assert _inside("gateway", "rootstep.gateway._server") == ["_server"]
    assert floor_of_module("rootstep.flows.cli") == ROOF and floor_of_module("rootstep.options") == ROOF
    assert floor_of_module("rootstep.ui") == ROOF and floor_of_module("rootstep.flows.annotate") == "flows"
    roof_imports = {target for source, target, _where in _edges() if source == ROOF}
    assert {"flows", "warehouse", "model"} <= roof_imports  # the CLI's own imports are seen
    assert ("annotation", "benchmarks") in {(source, target) for source, target, _where in _edges()}


def test_the_shared_types_do_not_load_the_storage():
    """A verifier needs `Task` and `Verdict`, not DuckDB: the types are on the bottom floor, so loading the
    benchmarks and the model leaves the warehouse, DuckDB and pyarrow unloaded (they once came with `Task`)."""
    import subprocess

    code = ("import sys, rootstep.model, rootstep.benchmarks\n"
            "from rootstep.benchmarks import verify\n"
            "print(sorted(m for m in ('duckdb', 'pyarrow', 'rootstep.warehouse') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_plugin_written_before_the_move_still_finds_the_types(recwarn):
    """`rootstep.warehouse.Verdict` and `rootstep.Registry` (the documented paths before `rootstep.model`)
    still resolve, each with a DeprecationWarning that names the new path; the stages themselves never use
    them (no stage imports a `rootstep.model` name from the warehouse or the package root)."""
    import warnings

    import rootstep
    import rootstep.model
    import rootstep.warehouse

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert rootstep.warehouse.Verdict is rootstep.model.Verdict
        assert rootstep.Registry is rootstep.model.Registry
    assert [str(w.message) for w in caught] == ["rootstep.warehouse.Verdict moved to rootstep.model.Verdict",
                                                 "rootstep.Registry moved to rootstep.model.Registry"]
    moved = set(rootstep.model.__all__)
    found = [f"{path.relative_to(ROOT)}:{line}: {module} {sorted(set(names) & moved)}"
             for stage in [*STAGES, "tests", "bench", "examples"] for path in sorted((ROOT / stage).rglob("*.py"))
             if "_drivers" not in path.parts
             for line, module, names in _imports(stage, path)
             if module in ("rootstep.warehouse", "rootstep") and set(names) & moved]
    assert found == []


def test_following_a_run_through_the_counterfactual_search_keeps_each_phase_together(tmp_path):
    """The search reads in phases: a reader following the trajectory from `find_decisive_step` meets the
    proposing code in `_propose`, the replaying code in `_trial`, and comes back to the search between them
    (`tests/_trajectory_walk.py`). Before the split (one `_attempt` file of six jobs, the search's own
    asking and replaying methods in `_counterfactual`) the walk made 29 stays and 24 returns; it made 21
    and 15 after it, 25 and 19 with the grounded phase (a search phase of its own: propose, budget, replay, as
    every phase does), 27 and 20 with the tool-call correction (one excursion into `benchmarks` to read the calls
    a BFCL run executed with the benchmark's own reader, and back), and the annotation core's phases do not leak
    into each other's files."""
    from tests._trajectory_walk import stays_and_returns, walk

    order = walk()
    stays, returns = stays_and_returns(order)
    assert stays <= 27 and returns <= 20, order
    where = {name: path for path, name in order}
    assert where["FixProposer.ask_at"] == where["ask_valid"] == where["retake_step"] == "annotation/_propose.py"
    assert where["FixTrial.attempt"] == where["check_flip"] == where["edit_size"] == "annotation/_trial.py"
    assert all(path == "annotation/_counterfactual.py" for path, name in order if name.startswith("_Search."))

    # the walker itself: a function handed the trajectory, a method of an object built with it, a return
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .a import start\n")
    (tmp_path / "pkg" / "a.py").write_text(
        "from .b import Helper, helper\n"
        "def start(trajectory):\n    h = Helper(trajectory)\n    h.go()\n    return late(trajectory)\n"
        "def late(trajectory):\n    return helper(trajectory)\n")
    (tmp_path / "pkg" / "b.py").write_text(
        "class Helper:\n    def __init__(self, trajectory):\n        self.trajectory = trajectory\n"
        "    def go(self):\n        return helper(self.trajectory)\n"
        "def helper(trajectory):\n    return trajectory\n")
    tiny = walk(tmp_path, ("rootstep.pkg", "start"))  # a folder under the root is a stage: rootstep.<folder>
    assert [name for _path, name in tiny] == ["start", "Helper.__init__", "Helper.go", "helper", "late"]
    assert stays_and_returns(tiny) == (3, 1)


def test_only_the_warehouse_writes_parquet():
    """The warehouse's tables and every Parquet export are written by the warehouse stage (`Warehouse.write_*`,
    `rootstep.warehouse.write_parquet`): no other stage imports the Parquet writer."""
    found = [f"{path.relative_to(ROOT)}:{line}" for stage in STAGES if stage != "warehouse"
             for path in sorted((ROOT / stage).rglob("*.py"))
             for line, module, names in _imports(stage, path)
             if module == "pyarrow.parquet" or (module == "pyarrow" and "parquet" in names)]
    assert found == []
    assert any(module == "pyarrow.parquet" for line, module, _ in _imports("warehouse", ROOT / "warehouse" / "export.py"))
