"""rootstep: who/when failure annotation for LLM multi-agent trajectories.

The package root holds what every stage may use (`lazy_exports`, `progress_bar`, `Registry`, the one registry
type of every stage, with its entry-point plugins) and the CLI
(`rootstep.cli`), which mounts each stage's commands.
"""

from rootstep._lazy import lazy_exports

__version__ = "0.1.0"

from rootstep.registry import Entry, Origin, Registry, UnknownName, entry_point_dist, plugin_errors

__getattr__ = lazy_exports(__name__, {"progress_bar": "_progress"})

__all__ = [
    "Entry",
    "Origin",
    "Registry",
    "UnknownName",
    "__version__",
    "entry_point_dist",
    "lazy_exports",
    "plugin_errors",
    "progress_bar",
]
