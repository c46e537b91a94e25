"""The `collect` flow: run each framework on each task, verify with Omega, store the run.

    from rootstep.flows.collect import collect
    report = collect(["ag2", "smolagents"], "gsm8k", limit=2, seed=0, model="local/qwen2.5-coder-0.5b")

One unit of work per (framework, task) (`CollectSpec`, run by `rootstep.flows._unit.perform` as a
Prefect task): the adapter runs the episode in its Docker image with every LLM call through the gateway
and the verifier decides; the flow then writes the run's `llm_calls` and then the trajectory (steps,
then the run row) to the warehouse. `rootstep run` runs the same unit without Prefect.

* **Retries**: a task is retried (twice by default) only on `AdapterError`, the infrastructure errors
  (a container that died, timed out, or printed no trajectory); a wrong answer is a result, not an error.
* **Limits**: per model and per sandbox pool, see `rootstep.flows._session`.
* **Cache = the warehouse**: a run whose (framework, benchmark, task, model, per-agent models,
  config_hash) is already stored as a collected run (`source = 'rootstep'`, no parent) is not run
  again. The warehouse is the persisted result store: a task's result exists once its run row is
  written, so a flow that crashed half-way and is started again skips every finished task and runs
  the rest. Prefect's own result persistence and cache policies are not used (`cache_policy=NONE`):
  they would duplicate what the warehouse already guarantees, keyed by inputs it cannot see.
* **Runner**: `runner=Runner(kind="dask"|"ray", ...)` runs the episodes in a cluster's worker
  processes (`rootstep.flows._runner`); the unit and what the flow writes are the same.
"""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

from prefect import flow
from pydantic import BaseModel, Field

from rootstep.model import Task

from ._remote import worker_id
from ._runner import Runner, open_runner
from ._session import DEFAULT_MODEL, Limits, Session, open_session
from ._unit import Outcome, UnitSpec, gather, unit_task


class CollectedRun(BaseModel):
    """What happened to one (framework, task) of a collection."""

    framework: str
    benchmark: str
    task_id: str
    model: str
    run_id: str | None = None
    success: bool | None = None
    cached: bool = False
    """The run was already in the warehouse: nothing was run."""
    n_steps: int = 0
    seconds: float = 0.0
    error: str | None = None
    """Why no run was stored (after retries), or the framework's own error kept in the run's metadata."""
    worker: str | None = None
    """`host:pid` of the process that ran the episode (the flow's with the thread runner)."""


class CollectReport(BaseModel):
    runs: list[CollectedRun] = Field(default_factory=list)
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        return {
            "runs": len(self.runs),
            "new": sum(1 for r in self.runs if r.run_id and not r.cached),
            "cached": sum(1 for r in self.runs if r.cached),
            "errors": sum(1 for r in self.runs if r.run_id is None),
            "successes": sum(1 for r in self.runs if r.success is True),
            "failures": sum(1 for r in self.runs if r.success is False),
        }


def stored_runs(session: Session, frameworks: Sequence[str], benchmarks: Sequence[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Collected runs already in the warehouse, keyed like `run_key`."""
    if not frameworks or not benchmarks:
        return {}
    marks_f = ", ".join("?" for _ in frameworks)
    marks_b = ", ".join("?" for _ in benchmarks)
    with session.lock:
        rows = session.warehouse.rows(
            "SELECT id, framework, benchmark, task_id, model, config_hash, success, n_steps, agent_models FROM runs "
            f"WHERE source = 'rootstep' AND parent_run_id IS NULL AND framework IN ({marks_f}) AND benchmark IN ({marks_b})",
            [*frameworks, *benchmarks])
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        agent_models = json.loads(r["agent_models"] or "{}") or {}
        out[run_key(r["framework"], r["benchmark"], r["task_id"], r["model"], agent_models, r["config_hash"])] = r
    return out


def run_key(framework: str, benchmark: str, task_id: str, model: str | None, agent_models: dict[str, str] | None,
            config_hash: str | None) -> tuple[Any, ...]:
    return (framework, benchmark, task_id, model, tuple(sorted((agent_models or {}).items())), config_hash)


class CollectSpec(UnitSpec):
    """One episode to collect: `framework` on `task` with `model` (`agent_models` per agent)."""

    framework: str
    task: Task
    model: str
    agent_models: dict[str, str] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.framework}/{self.task.benchmark}/{self.task.task_id}"

    def run(self, session: Session) -> "Collected":
        return collect_run(self, session)

    def failed(self, error: str) -> CollectedRun:
        return CollectedRun(framework=self.framework, benchmark=self.task.benchmark, task_id=self.task.task_id,
                            model=self.model, error=error)


Collected = Outcome[CollectedRun]


def collect_run(spec: CollectSpec, session: Session) -> Collected:
    """Run one episode and verify it; nothing written (the flow stores the run: calls, steps, run row)."""
    started = time.perf_counter()
    adapter = session.adapter(spec.framework)
    with session.episode_slot(spec.model):
        trajectory = adapter.run(spec.task, spec.model, agent_models=spec.agent_models or None)
    row = CollectedRun(
        framework=spec.framework, benchmark=spec.task.benchmark, task_id=spec.task.task_id, model=spec.model,
        run_id=trajectory.id, success=trajectory.success, n_steps=len(trajectory.steps),
        seconds=round(time.perf_counter() - started, 3), error=trajectory.metadata.get("error"), worker=worker_id())
    return Collected(row=row, runs=[trajectory])


@flow(name="rootstep-collect", persist_result=False)
def collect(
    frameworks: Sequence[str] = ("ag2", "smolagents"),
    benchmark: str = "gsm8k",
    limit: int | None = 2,
    seed: int | None = 0,
    model: str = DEFAULT_MODEL,
    agent_models: dict[str, str] | None = None,
    tasks: list[Task] | None = None,
    warehouse: str | None = None,
    limits: Limits | None = None,
    retries: int = 2,
    runner: Runner | None = None,
    session: Session | None = None,
) -> CollectReport:
    """Collect runs of `frameworks` on `limit` tasks of `benchmark` (shuffled with `seed`).

    Args:
        frameworks: adapter names (`rootstep frameworks`); a task of a kind a framework does not run
            is reported with an error, not run.
        benchmark: a registered benchmark (`rootstep benchmark list`); ignored when `tasks` is given.
        model: the agent model (any gateway model string); `agent_models` overrides it per agent.
        tasks: run these tasks instead of loading the benchmark.
        warehouse: path or URL (default `ROOTSTEP_WAREHOUSE` or ./rootstep-data).
        limits: concurrency per model and per sandbox pool.
        retries: Prefect retries of a task on infrastructure errors.
        runner: where the episodes run (default: threads of this process; see `rootstep.flows._runner`).
        session: the pipeline's session (internal: set by `pipeline`).
    """
    from rootstep.adapters import adapter_class

    started = time.perf_counter()
    if tasks is None:
        from rootstep.benchmarks import load_tasks

        tasks = load_tasks(benchmark, limit=limit, seed=seed)
    report = CollectReport()
    with open_session(warehouse, session=session, limits=limits) as session, open_runner(runner, session) as placement:
        stored = stored_runs(session, list(frameworks), sorted({t.benchmark for t in tasks}))
        collect_task = unit_task("collect-run", retries)
        pending: list[tuple[CollectSpec, Any]] = []
        session.ensure_images(frameworks)
        for framework in frameworks:
            adapter = session.adapter(framework)
            for t in tasks:
                spec = CollectSpec(framework=framework, task=t, model=model, agent_models=dict(agent_models or {}))
                problem = adapter_class(framework).cannot_run(t)
                if problem is not None:
                    report.runs.append(spec.failed(problem))
                    continue
                hit = stored.get(run_key(framework, t.benchmark, t.task_id, model, agent_models, adapter.config_hash(t)))
                if hit is not None:
                    report.runs.append(CollectedRun(framework=framework, benchmark=t.benchmark, task_id=t.task_id,
                                                    model=model, run_id=hit["id"], success=hit["success"],
                                                    n_steps=hit["n_steps"], cached=True))
                    continue
                pending.append((spec, placement.submit(collect_task, spec)))
        report.runs += gather(session, pending)
    report.seconds = round(time.perf_counter() - started, 3)
    return report
