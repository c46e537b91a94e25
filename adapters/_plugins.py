"""Adapters from outside this repository: pip-installed plugins and system files.

A package registers an adapter through an entry point (in its pyproject.toml):

    [project.entry-points."rootstep.adapters"]
    my-team = "my_pkg.adapter:MyTeamAdapter"        # an Adapter subclass, or a system file's path (str)

Loaded on first use of the adapter registry (the generic loading, origins and errors are in
`rootstep._plugins`). System files named by `$ROOTSTEP_SYSTEMS` (os.pathsep-separated, set by `--system`)
are registered the same way, so flow workers and deployments started from a `--system` command know them.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Callable

from rootstep import entry_point_dist, load_entry_points, plugin_errors, plugin_origin, record_error, record_origin
from rootstep.adapters._system import SYSTEMS_ENV

log = logging.getLogger("rootstep.plugins")

_systems_seen: set[str] = set()

__all__ = ["load_adapter_plugins", "origin", "plugin_errors", "register_system", "use_systems"]

origin = plugin_origin


def load_adapter_plugins(register: Callable[[type], Any]) -> None:
    from rootstep.adapters.base import Adapter

    def one(ep: EntryPoint, obj: Any) -> str:
        if isinstance(obj, (str, Path)):
            return register_system(obj, register, origin_label=f"plugin {entry_point_dist(ep)}")
        if not (isinstance(obj, type) and issubclass(obj, Adapter)):
            raise TypeError(f"{ep.value} is not an Adapter subclass or a system file path")
        register(obj)
        return obj.name

    load_entry_points("rootstep.adapters", one)
    load_systems_from_env(register)


def register_system(path: str | os.PathLike[str], register: Callable[[type], Any], *,
                    origin_label: str | None = None) -> str:
    """Load a system file and register its adapter; returns its name (SystemFileError when it is bad)."""
    from rootstep.adapters._command import system_adapter
    from rootstep.adapters._system import load_system

    spec = load_system(path)
    register(system_adapter(spec))
    record_origin(spec.name, origin_label or f"system {spec.path}")
    return spec.name


def load_systems_from_env(register: Callable[[type], Any]) -> None:
    for path in filter(None, os.environ.get(SYSTEMS_ENV, "").split(os.pathsep)):
        if path in _systems_seen:
            continue
        _systems_seen.add(path)
        try:
            register_system(path, register)
        except Exception as exc:  # noqa: BLE001 - reported by name like a broken plugin
            record_error(path, f"{type(exc).__name__}: {exc}")
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
