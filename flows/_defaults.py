"""What every command, flow and deployment uses when it is not told otherwise: one object, `DEFAULTS`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rootstep.gateway import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL


class Defaults(BaseModel):
    """The embedded defaults (the main job's slice; `rootstep pipeline` with no arguments)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    frameworks: tuple[str, ...] = ("ag2",)
    """Chosen by measurement on a 2-core machine with the offline models: AG2 episodes took 30-75 s against
    55-170 s for smolagents, and a counterfactual search with the 1.5B analyzer 3-9 minutes, so a slice of
    AG2 runs fits the main job's time while giving failures to search and, often, a success to corrupt.
    Name frameworks and benchmarks to go wider (`-f ag2 -f smolagents -b gsm8k:20`)."""
    benchmarks: dict[str, int] = {"gsm8k": 3, "mbpp": 2}
    """Benchmark name -> tasks (after shuffling with the seed): the pipeline's and the deployments' slice."""
    collect_benchmark: str = "gsm8k"
    """`rootstep collect` runs one benchmark: the first of the slice."""
    collect_limit: int = 2
    model: str = DEFAULT_MODEL
    """The agents' model."""
    annotator_model: str = DEFAULT_ANNOTATOR_MODEL
    """The analyzer's and the perturber's model when the agents run on an offline model."""
    cron: str = "0 2 * * *"
    """When the nightly deployment runs (UTC)."""

    def annotator_for(self, model: str) -> str:
        """The analyzer / perturber a run of agents on `model` gets: the same model, except that agents on an
        offline model get the stronger offline one (a 0.5B model rarely keeps the JSON contract)."""
        return self.annotator_model if model.startswith("local/") else model

    def benchmark_help(self) -> str:
        return " and ".join(f"{name}:{n}" for name, n in self.benchmarks.items())


DEFAULTS = Defaults()
