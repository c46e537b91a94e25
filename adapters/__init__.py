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
benchmarks through entry points (`rootstep.adapters._plugins`); every adapter is in `ADAPTERS` (a
`rootstep.model.Registry`: origin, load errors).
Importing this package is light: an adapter's module is imported when it is first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rootstep.model import Registry

if TYPE_CHECKING:
    from rootstep.adapters.base import Adapter


def _adopt(ep: Any, obj: Any) -> tuple[str, type["Adapter"]]:
    from rootstep.adapters._plugins import adopt_adapter

    return adopt_adapter(ep, obj)


def _discover(registry: Registry[type["Adapter"]]) -> None:
    from rootstep.adapters._plugins import load_systems_from_env

    load_systems_from_env(registry)


ADAPTERS: Registry[type["Adapter"]] = Registry("framework adapter", group="rootstep.adapters", adopt=_adopt,
                                                 discover=_discover)
"""Every framework adapter by name: the built-ins (imported on first use), pip-installed plugins (entry
point `rootstep.adapters`: an Adapter subclass or a system file's path), system files (`use_systems`,
`$ROOTSTEP_SYSTEMS`) and classes registered in code (`register_adapter`)."""
for _name, _ref in {
    "ag2": "rootstep.adapters._ag2:AG2Adapter",
    "smolagents": "rootstep.adapters._smolagents:SmolagentsAdapter",
    "metagpt": "rootstep.adapters._metagpt:MetaGPTAdapter",
    "owl": "rootstep.adapters._owl:OWLAdapter",
    "aflow": "rootstep.adapters._aflow:AFlowAdapter",
    "agentprune": "rootstep.adapters._agentprune:AgentPruneAdapter",
}.items():
    ADAPTERS.register_lazy(_name, _ref)


def register_adapter(cls: type["Adapter"]) -> type["Adapter"]:
    """Make `cls` available as `get_adapter(cls.name)` (usable as a class decorator)."""
    return ADAPTERS.register(cls.name, cls)


def adapter_class(name: str) -> type["Adapter"]:
    """The adapter class registered as `name`; KeyError naming the known ones otherwise."""
    return ADAPTERS.get(name)


def get_adapter(name: str, **kwargs: Any) -> "Adapter":
    """An adapter instance; `kwargs` go to its constructor (`gateway`, `sandbox`, `verifier`, options)."""
    return adapter_class(name)(**kwargs)


def list_adapters() -> list[str]:
    """Names of the registered adapters (built in, from plugins and system files), sorted."""
    return sorted(ADAPTERS.names())


def adapter_for(trajectory: Any) -> type["Adapter"]:
    """The adapter class of a stored trajectory; a system file's run registers its system file again
    (from `recording.system`) when this process does not know it yet."""
    name = trajectory.framework
    if name not in ADAPTERS:
        system = None if trajectory.recording is None else trajectory.recording.system
        if system is not None:
            use_systems([system.file])
    return adapter_class(name)


def with_adapter_reads(trajectory: Any) -> Any:
    """`trajectory` with who-reads-whom on its agent steps (`Step.metadata["reads"]`, from its adapter's
    `Adapter.reads`) when the framework's agents do not share one chat; unchanged otherwise (and for runs
    of frameworks this process does not know: imported traces)."""
    from rootstep.adapters.base import with_reads

    if trajectory.framework not in ADAPTERS and (trajectory.recording is None or trajectory.recording.system is None):
        return trajectory
    return with_reads(trajectory, adapter_for(trajectory).reads(trajectory))


def use_systems(paths: list[str]) -> list[str]:
    """Register system files (`--system`) here and in every process started from here; their names."""
    from rootstep.adapters._plugins import use_systems as use

    return use(paths)


__all__ = [
    "ADAPTERS",
    "adapter_class",
    "adapter_for",
    "with_adapter_reads",
    "get_adapter",
    "list_adapters",
    "register_adapter",
    "use_systems",
]
