"""Adapters, verifiers and benchmarks from outside this repository: pip-installed plugins and system files.

A package registers them through entry points (in its pyproject.toml):

    [project.entry-points."rootstep.adapters"]
    my-team = "my_pkg.adapter:MyTeamAdapter"        # an Adapter subclass, or a system file's path (str)
    [project.entry-points."rootstep.verifiers"]
    my-check = "my_pkg.verify:check"                # fn(answer, task, **options) -> Verdict
    [project.entry-points."rootstep.benchmarks"]
    my-bench = "my_pkg.bench:BENCHMARK"             # (BenchmarkInfo, loader), or a module that registers it

Each is loaded on first use of the registry it extends. A plugin that fails to load is recorded under its
name with the reason (`plugin_errors`, shown by `rootstep frameworks`) and logged; the rest keep working.
System files named by `$ROOTSTEP_SYSTEMS` (os.pathsep-separated, set by `--system`) are registered the
same way, so flow workers and deployments started from a `--system` command know them.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Callable

from rootstep.adapters._system import SYSTEMS_ENV

log = logging.getLogger("rootstep.plugins")

GROUPS = ("rootstep.adapters", "rootstep.verifiers", "rootstep.benchmarks")

_errors: dict[str, str] = {}
_origins: dict[str, str] = {}
_loaded: set[str] = set()
_systems_seen: set[str] = set()


def plugin_errors() -> dict[str, str]:
    """`group:name` (or a system file's path) -> why it did not load."""
    return dict(_errors)


def origin(name: str) -> str | None:
    """Where a non-built-in adapter, verifier or benchmark came from (`plugin <dist>`, `system <file>`)."""
    return _origins.get(name)


def _dist(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else ep.value


def _each(group: str, register: Callable[[EntryPoint, Any], str]) -> None:
    if group in _loaded:
        return
    _loaded.add(group)
    for ep in entry_points(group=group):
        key = f"{group}:{ep.name}"
        try:
            name = register(ep, ep.load())
            _origins[name] = f"plugin {_dist(ep)}"
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the CLI
            _errors[key] = f"{type(exc).__name__}: {exc}"
            log.warning("rootstep plugin %s (%s) did not load: %s: %s", key, ep.value, type(exc).__name__, exc)


def load_adapter_plugins(register: Callable[[type], Any]) -> None:
    from rootstep.adapters.base import Adapter

    def one(ep: EntryPoint, obj: Any) -> str:
        if isinstance(obj, (str, Path)):
            return register_system(obj, register, origin_label=f"plugin {_dist(ep)}")
        if not (isinstance(obj, type) and issubclass(obj, Adapter)):
            raise TypeError(f"{ep.value} is not an Adapter subclass or a system file path")
        register(obj)
        return obj.name

    _each("rootstep.adapters", one)
    load_systems_from_env(register)


def load_verifier_plugins() -> None:
    def one(ep: EntryPoint, obj: Any) -> str:
        from rootstep.benchmarks._registry import _VERIFIERS, verifier

        if ep.name not in _VERIFIERS:
            if not callable(obj):
                raise TypeError(f"{ep.value} is not a verifier function")
            verifier(ep.name)(obj)
        return ep.name

    _each("rootstep.verifiers", one)


def load_benchmark_plugins() -> None:
    def one(ep: EntryPoint, obj: Any) -> str:
        from rootstep.benchmarks._registry import _BENCHMARKS, BenchmarkInfo, benchmark

        if ep.name in _BENCHMARKS:  # the module registered it when it was imported
            return ep.name
        if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], BenchmarkInfo) and callable(obj[1]):
            info = obj[0].model_copy(update={"builtin": False})
            benchmark(info)(obj[1])
            return info.name
        raise TypeError(f"{ep.value} is not a (BenchmarkInfo, loader) pair and registers no benchmark {ep.name!r}")

    _each("rootstep.benchmarks", one)


def register_system(path: str | os.PathLike[str], register: Callable[[type], Any], *,
                    origin_label: str | None = None) -> str:
    """Load a system file and register its adapter; returns its name (SystemFileError when it is bad)."""
    from rootstep.adapters._command import system_adapter
    from rootstep.adapters._system import load_system

    spec = load_system(path)
    register(system_adapter(spec))
    _origins[spec.name] = origin_label or f"system {spec.path}"
    return spec.name


def load_systems_from_env(register: Callable[[type], Any]) -> None:
    for path in filter(None, os.environ.get(SYSTEMS_ENV, "").split(os.pathsep)):
        if path in _systems_seen:
            continue
        _systems_seen.add(path)
        try:
            register_system(path, register)
        except Exception as exc:  # noqa: BLE001 - reported by name like a broken plugin
            _errors[path] = f"{type(exc).__name__}: {exc}"
            log.warning("system file %s (from $%s) did not load: %s", path, SYSTEMS_ENV, exc)


def use_systems(paths: list[str]) -> list[str]:
    """Register system files for this process and every process it starts (`$ROOTSTEP_SYSTEMS`); their
    names. A bad file raises SystemFileError (the CLI's `--system`)."""
    from rootstep.adapters import register_adapter

    names: list[str] = []
    absolute: list[str] = []
    for path in paths:
        names.append(register_system(path, register_adapter))
        absolute.append(str(Path(path).expanduser().absolute()))
    current = [p for p in os.environ.get(SYSTEMS_ENV, "").split(os.pathsep) if p]
    merged = list(dict.fromkeys([*current, *absolute]))
    os.environ[SYSTEMS_ENV] = os.pathsep.join(merged)
    _systems_seen.update(absolute)
    return names
