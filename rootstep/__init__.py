"""rootstep: who/when failure annotation for LLM multi-agent trajectories.

The package root is the roof: the command line (`rootstep.cli`, which mounts each stage's commands), its
shared options and rendering, and `progress_bar` and `run_stoppable` for the stages' commands. The stages
live below it in their own folders (`rootstep.<stage>`) and stand on `rootstep.model` (the shared types,
errors, `Registry`, `lazy_exports`); no stage imports the roof.
"""

from rootstep.model import lazy_exports as _lazy_exports

__version__ = "0.1.0"

__getattr__ = _lazy_exports(__name__, {"progress_bar": "_progress", "run_stoppable": "_stop"})

__all__ = ["__version__", "progress_bar", "run_stoppable"]
