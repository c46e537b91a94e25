"""One module per multi-agent framework, the common Adapter contract, and the LLM gateway.

    from rootstep.adapters import get_adapter, list_adapters
    adapter = get_adapter("ag2", gateway=server)      # server: a started rootstep.gateway.GatewayServer
    trajectory = adapter.run(task, "openai/gpt-4o-mini")
    replayed = adapter.replay(trajectory, intervention)

Adapters: `ag2` (AutoGen GroupChat), `smolagents` (manager CodeAgent with a managed agent), `metagpt`
(a MetaGPT Team of roles), `owl` (camel-ai's Workforce), `aflow` (AFlow's operator workflows,
reimplemented), `agentprune` (AgentPrune's pruned communication graph, reimplemented). Each runs its
framework inside its own pinned sandbox image (`rootstep frameworks build`). See docs/adapters.md.
Your own program runs as a framework from a system file (`use_systems`, `--system FILE`,
`rootstep.adapters._command`; docs/your-system.md); pip-installed plugins add adapters, verifiers and
benchmarks through entry points (`rootstep.adapters._plugins`).
Importing this package is light: an adapter's module is imported when it is first asked for.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from rootstep import lazy_exports

if TYPE_CHECKING:
    from rootstep.adapters._visible_tests import visible_tests
    from rootstep.adapters.base import Adapter

# `visible_tests(task)`: the tests a coding task shows its agents (the fault injector reads them too)
__getattr__ = lazy_exports(__name__, {"visible_tests": "_visible_tests"})

_BUILTIN: dict[str, str] = {
    "ag2": "rootstep.adapters._ag2:AG2Adapter",
    "smolagents": "rootstep.adapters._smolagents:SmolagentsAdapter",
    "metagpt": "rootstep.adapters._metagpt:MetaGPTAdapter",
    "owl": "rootstep.adapters._owl:OWLAdapter",
    "aflow": "rootstep.adapters._aflow:AFlowAdapter",
    "agentprune": "rootstep.adapters._agentprune:AgentPruneAdapter",
}
_EXTRA: dict[str, type] = {}


def register_adapter(cls: type["Adapter"]) -> type["Adapter"]:
    """Make `cls` available as `get_adapter(cls.name)` (usable as a class decorator)."""
    _EXTRA[cls.name] = cls
    return cls


def _load_plugins() -> None:
    from rootstep.adapters._plugins import load_adapter_plugins

    load_adapter_plugins(register_adapter)


def adapter_class(name: str) -> type["Adapter"]:
    """The adapter class registered as `name`; KeyError naming the known ones otherwise."""
    if name not in _BUILTIN:
        _load_plugins()
    if name in _EXTRA:
        return _EXTRA[name]
    if name not in _BUILTIN:
        raise KeyError(f"unknown framework adapter {name!r}; known: {', '.join(list_adapters())}")
    module, _, attr = _BUILTIN[name].partition(":")
    return getattr(import_module(module), attr)


def get_adapter(name: str, **kwargs: Any) -> "Adapter":
    """An adapter instance; `kwargs` go to its constructor (`gateway`, `sandbox`, `verifier`, options)."""
    return adapter_class(name)(**kwargs)


def list_adapters() -> list[str]:
    """Names of the registered adapters (built in, from plugins and system files), sorted."""
    _load_plugins()
    return sorted(set(_BUILTIN) | set(_EXTRA))


def adapter_for(trajectory: Any) -> type["Adapter"]:
    """The adapter class of a stored trajectory; a system file's run registers its system file again
    (from `recording.system`) when this process does not know it yet."""
    name = trajectory.framework
    if name not in _BUILTIN and name not in _EXTRA:
        _load_plugins()
        system = None if trajectory.recording is None else trajectory.recording.system
        if name not in _EXTRA and system is not None:
            from rootstep.adapters._plugins import use_systems

            use_systems([system.file])
    return adapter_class(name)


def use_systems(paths: list[str]) -> list[str]:
    """Register system files (`--system`) here and in every process started from here; their names."""
    from rootstep.adapters._plugins import use_systems as use

    return use(paths)


__all__ = [
    "adapter_class",
    "adapter_for",
    "get_adapter",
    "list_adapters",
    "register_adapter",
    "use_systems",
    "visible_tests",
]
