"""Deployments (scheduled flows) and the one-off backfill of a new benchmark.

    rootstep deploy                          # register the nightly deployments on the Prefect server
    rootstep deploy --serve                  # ... and execute their scheduled runs in this process
    rootstep backfill --benchmark new.jsonl --verifier numeric

A deployment is a `RunnerDeployment` (`flow.to_deployment`) with a cron schedule, registered on the
Prefect server named by `PREFECT_API_URL` (`prefect server start`, or Prefect Cloud). Nothing runs it
until a runner serves it: `rootstep deploy --serve` (Prefect's `serve`: it polls the server and
starts each due run as a subprocess), or a worker if you prefer work pools. Against the ephemeral API
(no `PREFECT_API_URL`) a deployment lives only as long as the process, so `deploy` refuses to register
without a server unless `--serve` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._defaults import DEFAULTS

FlowName = Literal["pipeline", "collect", "annotate"]
"""The flows a deployment can run (one stage of annotation: `annotate` with `parameters={"stages": [...]}`)."""


class Schedule(BaseModel):
    """One deployment: which flow, when (cron, UTC), with which parameters."""

    model_config = ConfigDict(extra="forbid")

    name: str
    flow: FlowName = "pipeline"
    cron: str = DEFAULTS.cron
    parameters: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    paused: bool = False


def default_schedules(model: str = DEFAULTS.model, warehouse: str | None = None,
                      frameworks: list[str] | None = None, benchmarks: dict[str, int | None] | None = None,
                      cron: str = DEFAULTS.cron) -> list[Schedule]:
    """The nightly pipeline on a benchmark slice (collect, split, counterfactual, inject)."""
    params: dict[str, Any] = {"model": model}
    if warehouse is not None:
        params["warehouse"] = warehouse
    if frameworks is not None:
        params["frameworks"] = frameworks
    if benchmarks is not None:
        params["benchmarks"] = benchmarks
    return [Schedule(name="nightly", flow="pipeline", cron=cron, parameters=params,
                     description="nightly collection and annotation of a benchmark slice")]


def flow_object(name: FlowName) -> Any:
    if name == "pipeline":
        from .pipeline import pipeline

        return pipeline
    if name == "collect":
        from .collect import collect

        return collect
    from .annotate import annotate

    return annotate


def to_deployments(schedules: list[Schedule]) -> list[Any]:
    """`RunnerDeployment`s for the schedules (entrypoints by module path: the installed package)."""
    from prefect.deployments.runner import EntrypointType

    return [
        flow_object(s.flow).to_deployment(
            name=s.name, cron=s.cron, parameters=s.parameters, description=s.description or None, paused=s.paused,
            tags=["rootstep"], entrypoint_type=EntrypointType.MODULE_PATH,
        )
        for s in schedules
    ]


def api_url() -> str | None:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


def deploy(schedules: list[Schedule], *, serve: bool = False) -> list[str]:
    """Register the deployments on the Prefect server; with `serve`, also run their scheduled runs here
    (blocks). Returns the deployments' full names (`flow-name/deployment-name`)."""
    deployments = to_deployments(schedules)
    names = [f"{d.flow_name}/{d.name}" for d in deployments]
    if serve:
        from prefect import serve as prefect_serve

        prefect_serve(*deployments)
        return names
    if not api_url():
        raise RuntimeError("no Prefect server: set PREFECT_API_URL (start one with `prefect server start`), "
                           "or pass --serve to run the schedules in this process")
    for d in deployments:
        d.apply()
    return names


def backfill(benchmark_file: str | Path, verifier: str, *, name: str | None = None, limit: int | None = None,
             seed: int | None = 0, frameworks: list[str] | None = None, model: str = DEFAULTS.model,
             analyzer_model: str | None = None, perturber_model: str | None = None, warehouse: str | None = None,
             **pipeline_options: Any) -> Any:
    """Register the JSONL file as benchmark `name` (default: the file's stem) with `verifier`, then run
    the pipeline on it once. Registering again replaces the stored copy with the file as it is now."""
    from rootstep.benchmarks import add_benchmark

    from .pipeline import pipeline

    path = Path(benchmark_file)
    bench = name or "".join(c if c.isalnum() or c in "._+-" else "-" for c in path.stem)[:64]
    add_benchmark(bench, path, verifier, force=True)
    return pipeline(frameworks=frameworks, benchmarks={bench: limit}, seed=seed, model=model,
                    analyzer_model=analyzer_model, perturber_model=perturber_model, warehouse=warehouse,
                    **pipeline_options)
