"""Adapters from outside this repository: pip-installed plugins and system files.

A package registers an adapter through an entry point (in its pyproject.toml):

    [project.entry-points."rootstep.adapters"]
    my-team = "my_pkg.adapter:MyTeamAdapter"        # an Adapter subclass, or a system file's path (str)

Loaded on first use of the adapter registry (`rootstep.adapters.ADAPTERS`, a `rootstep.model.Registry`, which
keeps each adapter's origin and each plugin's load error). System files named by `$ROOTSTEP_SYSTEMS`
(os.pathsep-separated, set by `--system`) are registered the same way, so flow workers and deployments
started from a `--system` command know them; one that does not load is recorded under its path.
"""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rootstep.model import Origin, Registry, plugin_errors
from rootstep.adapters._system import SYSTEMS_ENV

if TYPE_CHECKING:
    from rootstep.adapters.base import Adapter

__all__ = ["adopt_adapter", "load_systems_from_env", "plugin_errors", "register_system", "use_systems"]


def adopt_adapter(ep: EntryPoint, obj: Any) -> tuple[str, type["Adapter"]]:
    """What an entry point of `rootstep.adapters` loaded, as (name, adapter class): an Adapter subclass, or
    a system file's path (its adapter); TypeError for anything else."""
    from rootstep.adapters.base import Adapter

    if isinstance(obj, (str, Path)):
        cls = _system_class(obj)
        return cls.name, cls
    if not (isinstance(obj, type) and issubclass(obj, Adapter)):
        raise TypeError(f"{ep.value} is not an Adapter subclass or a system file path")
    return obj.name, obj


def _system_class(path: str | os.PathLike[str]) -> type["Adapter"]:
    from rootstep.adapters._command import system_adapter
    from rootstep.adapters._system import load_system

    return system_adapter(load_system(os.fspath(path)))


def register_system(path: str | os.PathLike[str], registry: Registry[type["Adapter"]]) -> str:
    """Load a system file and register its adapter; returns its name (SystemFileError when it is bad)."""
    cls = _system_class(path)
    registry.register(cls.name, cls, origin=Origin.SYSTEM_FILE, source=str(cls.system.path))  # type: ignore[attr-defined]
    return cls.name


def load_systems_from_env(registry: Registry[type["Adapter"]]) -> None:
    """Register the system files of `$ROOTSTEP_SYSTEMS` not seen yet; a bad one is recorded under its path."""
    for path in filter(None, os.environ.get(SYSTEMS_ENV, "").split(os.pathsep)):
        if not registry.once(f"system {path}"):
            continue
        try:
            register_system(path, registry)
        except Exception as exc:  # noqa: BLE001 - reported by name like a broken plugin
            registry.fail(path, path, f"{type(exc).__name__}: {exc}",
                          origin=Origin.SYSTEM_FILE, source=path)


def use_systems(paths: list[str]) -> list[str]:
    """Register system files for this process and every process it starts (`$ROOTSTEP_SYSTEMS`); their
    names. A bad file raises SystemFileError (the CLI's `--system`)."""
    from rootstep.adapters import ADAPTERS

    names: list[str] = []
    absolute: list[str] = []
    for path in paths:
        names.append(register_system(path, ADAPTERS))
        absolute.append(str(Path(path).expanduser().absolute()))
    current = [p for p in os.environ.get(SYSTEMS_ENV, "").split(os.pathsep) if p]
    os.environ[SYSTEMS_ENV] = os.pathsep.join(dict.fromkeys([*current, *absolute]))
    for path in absolute:
        ADAPTERS.once(f"system {path}")
    return names
