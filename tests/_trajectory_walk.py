"""How far a reader travels following a trajectory through the annotation core, read with Python's parser.

Start at a function (`find_decisive_step`), read its body, and follow every call that hands the trajectory
on: a call with `trajectory` (or `something.trajectory`) among its arguments, a class built with it (its
`__init__`), a call of a method of an object that holds it (`self.x(...)`, `search.x(...)`) or of a part
that object built (`self.part.x(...)`), and inside the
annotation core every call of its own functions (what the search does with the run). Each function is read once, in
the order a reader meets the calls (depth first). The files the reader is in form *stays* (a run of
functions read in one file); a *return* is a stay in a file the reader had already left. Fewer returns: the
code for one phase of the search sits together.

Run as a script to print the walk of a checkout: `python tests/_trajectory_walk.py [ROOT]`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLLOWED = "trajectory"


@dataclass
class _Function:
    name: str
    path: Path
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: str | None = None
    """The class the function is a method of."""


@dataclass
class _Module:
    path: Path
    functions: dict[str, _Function] = field(default_factory=dict)
    classes: dict[str, dict[str, _Function]] = field(default_factory=dict)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)
    """local name -> (absolute module, name in it)."""


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["rootstep", *parts]) if parts and parts[0] != "rootstep" else ".".join(parts)


def _read(root: Path) -> dict[str, _Module]:
    modules: dict[str, _Module] = {}
    for path in sorted(root.glob("*/**/*.py")):
        if path.relative_to(root).parts[0] in {"tests", "bench", "examples", "scripts", "docs", ".venv"}:
            continue
        name = _module_name(root, path)
        tree = ast.parse(path.read_text(), filename=str(path))
        module = modules[name] = _Module(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                module.functions[node.name] = _Function(node.name, path, node)
            elif isinstance(node, ast.ClassDef):
                module.classes[node.name] = {
                    item.name: _Function(item.name, path, item, node.name)
                    for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    module.imported[alias.asname or alias.name] = (base, alias.name)
    return modules


def _resolve(modules: dict[str, _Module], module: str, name: str, seen: int = 0) -> _Function | dict[str, _Function] | None:
    """The function (or a class's methods) `name` means in `module`, through imports and re-exports."""
    found = modules.get(module)
    if found is None or seen > 8:
        return None
    if name in found.functions:
        return found.functions[name]
    if name in found.classes:
        return found.classes[name]
    if name in found.imported:
        return _resolve(modules, *found.imported[name], seen=seen + 1)
    return None


def _names_followed(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Name) and n.id == FOLLOWED) or (isinstance(n, ast.Attribute) and n.attr == FOLLOWED)
               for n in ast.walk(node))


def _calls(modules: dict[str, _Module], module: str, function: _Function, core: Path) -> list[_Function]:
    """The functions `function` hands the trajectory to, in the order of their calls in its body: a function
    given it, a class built with it (its `__init__`, then the methods called on the object), a method of an
    object that holds it, and every function of the `core` folder it calls (the search's own work)."""
    out: list[_Function] = []
    calls = sorted((n for n in ast.walk(function.node) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    holders: dict[str, dict[str, _Function]] = {"self": modules[module].classes.get(function.owner or "", {})}
    for node in ast.walk(function.node):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and _names_followed(node.value)):
            built = _resolve(modules, module, node.value.func.id)
            if isinstance(built, dict):
                holders[node.targets[0].id] = built
    parts = _parts(modules, module, function.owner)
    for call in calls:
        func = call.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"
                and func.attr in parts.get(func.value.attr, {})):
            out.append(parts[func.value.attr][func.attr])  # self.part.method(): a part the object holds
        elif isinstance(call.func, ast.Name):
            arguments = [*call.args, *(k.value for k in call.keywords)]
            target = _resolve(modules, module, call.func.id)
            if isinstance(target, dict):
                target = target.get("__init__")
            if target is not None and (target.path.is_relative_to(core) or any(_names_followed(a) for a in arguments)):
                out.append(target)
        elif (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
              and call.func.attr in holders.get(call.func.value.id, {})):
            out.append(holders[call.func.value.id][call.func.attr])
    return out


def _parts(modules: dict[str, _Module], module: str, owner: str | None) -> dict[str, dict[str, _Function]]:
    """The objects a class builds in its `__init__` (`self.part = Part(...)`): attribute -> the part's methods."""
    init = modules[module].classes.get(owner or "", {}).get("__init__")
    found: dict[str, dict[str, _Function]] = {}
    for node in ast.walk(init.node) if init is not None else ():
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute)
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)):
            built = _resolve(modules, module, node.value.func.id)
            if isinstance(built, dict):
                found[node.targets[0].attr] = built
    return found


def walk(root: Path = ROOT, start: tuple[str, str] = ("rootstep.annotation", "find_decisive_step")) -> list[tuple[str, str]]:
    """(file, function) in the order a reader following the trajectory meets them."""
    modules = _read(root)
    core = root / start[0].split(".")[1]
    by_path = {m.path: name for name, m in modules.items()}
    first = _resolve(modules, *start)
    if first is None:
        raise LookupError(f"{start[0]}.{start[1]} not found under {root}")
    order: list[tuple[str, str]] = []
    seen: set[tuple[Path, str | None, str]] = set()

    def visit(function: _Function) -> None:
        key = (function.path, function.owner, function.name)
        if key in seen:
            return
        seen.add(key)
        qualified = f"{function.owner}.{function.name}" if function.owner else function.name
        order.append((str(function.path.relative_to(root)), qualified))
        for callee in _calls(modules, by_path[function.path], function, core):
            visit(callee)

    visit(first)
    return order


def stays_and_returns(order: list[tuple[str, str]]) -> tuple[int, int]:
    """How many stays the walk makes and how many of them return to a file it had left."""
    stays: list[str] = []
    for path, _ in order:
        if not stays or stays[-1] != path:
            stays.append(path)
    returns = sum(1 for i, path in enumerate(stays) if path in stays[:i])
    return len(stays), returns


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    order = walk(root)
    stays, returns = stays_and_returns(order)
    previous = None
    for path, name in order:
        print(f"{path if path != previous else '':<34} {name}")
        previous = path
    print(f"{len(order)} functions, {stays} stays, {returns} returns to a file already left")
