"""The `collect` flow: run each framework on each task, verify with Omega, store the run.

    from rootstep.flows.collect import collect
    report = collect(["ag2", "smolagents"], "gsm8k", limit=2, seed=0, model="local/qwen2.5-coder-0.5b")

One Prefect task per (framework, task): the adapter runs the episode in its Docker image with every
LLM call through the gateway, the verifier decides, and the gateway's journal of the run (its
`llm_calls`) and then the trajectory (steps, then the run row) are written to the warehouse.

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
  processes (`rootstep.flows._runner`); each returns its trajectory and the LLM calls of its own
  gateway, and the flow writes them exactly as it writes the thread runner's (calls, steps, run row).
"""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

from prefect import flow
from pydantic import BaseModel, Field

from rootstep.warehouse import LLMCall, Task, Trajectory

from ._remote import WorkerSpec, open_worker_session, worker_id
from ._runner import Runner, open_runner
from ._session import DEFAULT_MODEL, Limits, Session, get_session, open_session


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


class Collected(BaseModel):
    """What an episode run in another process hands back to the flow, which stores it."""

    run: CollectedRun
    trajectory: Trajectory
    calls: list[LLMCall] = Field(default_factory=list)
    """The LLM calls of the episode, as the worker's gateway journaled them."""


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


def infrastructure_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry only the adapter's infrastructure errors."""
    from rootstep.adapters.base import AdapterError

    try:
        exc = state.result(raise_on_failure=False)
    except Exception as raised:  # a result that cannot be read back is the exception itself
        exc = raised
    return isinstance(exc, AdapterError)


def stored_runs(session_id: str, frameworks: Sequence[str], benchmarks: Sequence[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Collected runs already in the warehouse, keyed like `run_key`."""
    session = get_session(session_id)
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


def _episode(session: Session, framework: str, task: Task, model: str, agent_models: dict[str, str]) -> Trajectory:
    adapter = session.adapter(framework)
    with session.episode_slot(model):
        return adapter.run(task, model, agent_models=agent_models or None)


def _collected_run(framework: str, task: Task, model: str, trajectory: Trajectory, started: float) -> CollectedRun:
    return CollectedRun(
        framework=framework, benchmark=task.benchmark, task_id=task.task_id, model=model, run_id=trajectory.id,
        success=trajectory.success, n_steps=len(trajectory.steps), seconds=round(time.perf_counter() - started, 3),
        error=trajectory.metadata.get("error"), worker=worker_id(),
    )


def collect_run(session_id: str, framework: str, task: Task, model: str, agent_models: dict[str, str]) -> CollectedRun:
    """Run one episode and store it (calls first, then steps, then the run row: the commit)."""
    session = get_session(session_id)
    started = time.perf_counter()
    trajectory = _episode(session, framework, task, model, agent_models)
    with session.lock:
        session.gateway.flush(session.warehouse, [trajectory.recorded().gateway_run_id])
        session.warehouse.write_trajectories([trajectory])
    return _collected_run(framework, task, model, trajectory, started)


def _collect_remote(worker: WorkerSpec, framework: str, task: Task, model: str, agent_models: dict[str, str]) -> Collected:
    """Run one episode in this (worker) process and hand it back; the flow stores it (`store_collected`)."""
    started = time.perf_counter()
    with open_worker_session(worker) as session:
        trajectory = _episode(session, framework, task, model, agent_models)
        calls = session.gateway.calls(trajectory.recorded().gateway_run_id)
    return Collected(run=_collected_run(framework, task, model, trajectory, started), trajectory=trajectory, calls=calls)


def store_collected(session: Session, collected: Collected) -> CollectedRun:
    """In the flow's process: the episode's calls, then its steps and run row (the commit)."""
    with session.lock:
        session.store_calls(collected.calls)
        session.warehouse.write_trajectories([collected.trajectory])
    return collected.run


def _collect_task(retries: int, remote: bool = False):
    from prefect import task
    from prefect.cache_policies import NONE

    return task(_collect_remote if remote else collect_run, name="collect-run", retries=retries, retry_delay_seconds=1,
                retry_condition_fn=infrastructure_error, cache_policy=NONE, persist_result=False,
                task_run_name="{framework}/{task.benchmark}/{task.task_id}")


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
    session_id: str | None = None,
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
        session_id: the pipeline's session (internal: set by `pipeline`).
    """
    from rootstep.adapters import adapter_class

    started = time.perf_counter()
    if tasks is None:
        from rootstep.benchmarks import load_tasks

        tasks = load_tasks(benchmark, limit=limit, seed=seed)
    report = CollectReport()
    with open_session(warehouse, session_id=session_id, limits=limits) as session, \
            open_runner(runner, session) as placement:
        stored = stored_runs(session.id, list(frameworks), sorted({t.benchmark for t in tasks}))
        collect_task = _collect_task(retries, remote=placement is not None)
        pending: list[tuple[str, Task, Any]] = []
        for framework in frameworks:
            adapter = session.adapter(framework)
            kinds = adapter_class(framework).task_kinds
            for t in tasks:
                if t.kind not in kinds:
                    report.runs.append(CollectedRun(framework=framework, benchmark=t.benchmark, task_id=t.task_id,
                                                    model=model, error=f"{framework} does not run {t.kind} tasks"))
                    continue
                hit = stored.get(run_key(framework, t.benchmark, t.task_id, model, agent_models, adapter.config_hash(t)))
                if hit is not None:
                    report.runs.append(CollectedRun(framework=framework, benchmark=t.benchmark, task_id=t.task_id,
                                                    model=model, run_id=hit["id"], success=hit["success"],
                                                    n_steps=hit["n_steps"], cached=True))
                    continue
                if placement is None:
                    future = collect_task.submit(session.id, framework, t, model, dict(agent_models or {}))
                else:
                    future = placement.submit(collect_task, {"worker": placement.worker, "framework": framework, "task": t,
                                                             "model": model, "agent_models": dict(agent_models or {})})
                pending.append((framework, t, future))
        for framework, t, future in pending:
            future.wait()
            state = future.state
            exc: BaseException | None = None
            if state.is_completed():
                result = future.result()
                if isinstance(result, Collected):
                    try:
                        result = store_collected(session, result)
                    except Exception as raised:  # the run is not stored: reported like a failed task
                        exc = raised
                if exc is None:
                    report.runs.append(result)
                    continue
            else:
                exc = state.result(raise_on_failure=False)
            report.runs.append(CollectedRun(framework=framework, benchmark=t.benchmark, task_id=t.task_id,
                                            model=model, error=f"{type(exc).__name__}: {str(exc)[:500]}"))
    report.seconds = round(time.perf_counter() - started, 3)
    return report

