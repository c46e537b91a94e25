"""rootstep: who/when failure annotation for LLM multi-agent trajectories."""

__version__ = "0.1.0"
