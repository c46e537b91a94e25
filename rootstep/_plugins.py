"""Entry-point plugins, shared by the registries of every stage: adapters, verifiers and benchmarks from
outside this repository (pip-installed plugins; system files register through the same origins).

A package registers them through entry points (in its pyproject.toml):

    [project.entry-points."rootstep.adapters"]
    my-team = "my_pkg.adapter:MyTeamAdapter"        # an Adapter subclass, or a system file's path (str)
    [project.entry-points."rootstep.verifiers"]
    my-check = "my_pkg.verify:check"                # fn(answer, task, **options) -> Verdict
    [project.entry-points."rootstep.benchmarks"]
    my-bench = "my_pkg.bench:BENCHMARK"             # (BenchmarkInfo, loader), or a module that registers it

Each is loaded on first use of the registry it extends. A plugin that fails to load is recorded under its
name with the reason (`plugin_errors`, shown by `rootstep frameworks`) and logged; the rest keep working.
Each stage loads its own group (`rootstep.adapters._plugins`, `rootstep.benchmarks._plugins`) through
`load_entry_points`; what loaded from where and what failed is kept here, in one place, for `rootstep
frameworks`.
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable

log = logging.getLogger("rootstep.plugins")

GROUPS = ("rootstep.adapters", "rootstep.verifiers", "rootstep.benchmarks")

_errors: dict[str, str] = {}
_origins: dict[str, str] = {}
_loaded: set[str] = set()


def plugin_errors() -> dict[str, str]:
    """`group:name` (or a system file's path) -> why it did not load."""
    return dict(_errors)


def origin(name: str) -> str | None:
    """Where a non-built-in adapter, verifier or benchmark came from (`plugin <dist>`, `system <file>`)."""
    return _origins.get(name)


def entry_point_dist(ep: EntryPoint) -> str:
    """`<distribution> <version>` of an entry point (its value when it has no distribution)."""
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else ep.value


def record_origin(name: str, label: str) -> None:
    """Remember where `name` came from (`plugin <dist>`, `system <file>`)."""
    _origins[name] = label


def record_error(key: str, reason: str) -> None:
    """Remember why `key` (`group:name`, or a system file's path) did not load."""
    _errors[key] = reason


def load_entry_points(group: str, register: Callable[[EntryPoint, Any], str]) -> None:
    """Load the entry points of `group` once per process: `register(ep, loaded)` returns the registered
    name; a plugin that raises is recorded under `group:name` with the reason and logged."""
    if group in _loaded:
        return
    _loaded.add(group)
    for ep in entry_points(group=group):
        key = f"{group}:{ep.name}"
        try:
            name = register(ep, ep.load())
            _origins[name] = f"plugin {entry_point_dist(ep)}"
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the CLI
            _errors[key] = f"{type(exc).__name__}: {exc}"
            log.warning("rootstep plugin %s (%s) did not load: %s: %s", key, ep.value, type(exc).__name__, exc)


