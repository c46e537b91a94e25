"""rootstep: who/when failure annotation for LLM multi-agent trajectories.

The package root is the roof: the command line (`rootstep.cli`, which mounts each stage's commands), its
shared options and rendering, and `progress_bar` and `run_stoppable` for the stages' commands. The stages
live below it in their own folders (`rootstep.<stage>`) and stand on `rootstep.model` (the shared types,
errors, `Registry`, `lazy_exports`); no stage imports the roof.
"""

from rootstep.model import lazy_exports as _lazy_exports

__version__ = "0.1.0"

_roof = _lazy_exports(__name__, {"progress_bar": "_progress", "run_stoppable": "_stop"})
_MOVED = ("Entry", "Origin", "Registry", "UnknownName", "entry_point_dist", "lazy_exports", "plugin_errors")


def __getattr__(name: str):
    """The roof's own names; and the registry's, which lived here before `rootstep.model` (`rootstep.Registry`
    still works, with a `DeprecationWarning`: plugins written before the move keep loading)."""
    if name in _MOVED:
        import warnings

        import rootstep.model as model

        warnings.warn(f"rootstep.{name} moved to rootstep.model.{name}", DeprecationWarning, stacklevel=2)
        return getattr(model, name)
    return _roof(name)

__all__ = ["__version__", "progress_bar", "run_stoppable"]
