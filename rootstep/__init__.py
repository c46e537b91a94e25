"""rootstep: who/when failure annotation for LLM multi-agent trajectories.

The package root holds what every stage may use (`lazy_exports`, `progress_bar`, the entry-point plugin
loading of every registry) and the CLI
(`rootstep.cli`), which mounts each stage's commands.
"""

from rootstep._lazy import lazy_exports

__version__ = "0.1.0"

from rootstep._plugins import (
    entry_point_dist,
    load_entry_points,
    plugin_errors,
    record_error,
    record_origin,
)
from rootstep._plugins import origin as plugin_origin

__getattr__ = lazy_exports(__name__, {"progress_bar": "_progress"})

__all__ = [
    "__version__",
    "entry_point_dist",
    "lazy_exports",
    "load_entry_points",
    "plugin_errors",
    "plugin_origin",
    "progress_bar",
    "record_error",
    "record_origin",
]
