"""The annotation flows: `annotate` (what `rootstep annotate`, the pipeline and the deployments run), made of
`counterfactual` over unlabelled failures, `inject` over successes and `recheck` of labels.

    from rootstep.flows.annotate import annotate, counterfactual, inject
    annotate(analyzer_model="openai/gpt-4o-mini", perturber_model="openai/gpt-4o-mini")
    counterfactual(analyzer_model="openai/gpt-4o-mini", budget=Budget(max_replays=4))

The queues are named queries of the warehouse (`counterfactual_queue`, `inject_queue`, `recheck_queue`)
over its `failures` / `successes` views (collected runs only: replayed runs have
a `parent_run_id` and are in neither view), restricted to runs `rootstep` collected (`source =
'rootstep'`: imported Who&When runs cannot be replayed) and to the frameworks / benchmarks asked for:

* counterfactual: failures with no `counterfactual` annotation yet (a verified label, an `unresolved`
  or a `verifier_suspect` record take a run out of the queue), and not those whose verdict is suspect
  (the `verdict_suspect` view: the verifier may have misread a right answer) unless `include_suspect`;
* inject: successes not injected yet (a success that resisted every corruption gets an `unresolved`
  `fault_injection` record, never a label, and is not tried again).

One unit of work per run (`CounterfactualSpec` / `InjectSpec` in `rootstep.flows._searches`: the run and its
recorded LLM calls, read by the flow, and the search's settings; `rootstep.flows._unit`) runs the pure search
(`find_decisive_step` / `inject_fault`) with `adapter_replay` over the run's framework adapter and
returns what it found; the flow then writes, in this order: the replays' LLM calls, the replayed runs
(`parent_run_id` = the run), the `Replay` rows, and the annotation last: the annotation is what takes
the run out of its queue, so a crash before it re-does the run's search on the next start, and ids
being content-derived, nothing written twice shows twice. Every annotation carries its cost
(`Annotation.cost`: LLM calls, tokens, USD, wall seconds, replays). The same unit runs in the flow's
threads or, with `runner=Runner(kind="dask"|"ray")`, in a cluster's worker processes.
"""

from __future__ import annotations

import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Literal, Sequence

from prefect import flow
from pydantic import BaseModel, Field

from rootstep.annotation import Budget, InjectionMode
from rootstep.warehouse import counterfactual_queue, inject_queue, recheck_queue

from ._defaults import DEFAULTS
from ._runner import Runner, open_runner, start_cluster
from ._searches import AnnotatedRun, Causality, CounterfactualSpec, InjectSpec, SearchSpec
from ._session import Limits, Session, open_session, stopped_by_signals
from ._unit import gather, unit_task

Stage = Literal["counterfactual", "inject"]


class AnnotateReport(BaseModel):
    runs: list[AnnotatedRun] = Field(default_factory=list)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    """Each stage's seconds (`annotate`: counterfactual, inject, recheck)."""


def _search_inputs(session: Session, run_id: str) -> dict[str, Any]:
    """What a search of `run_id` reads, for its spec: the run and its recorded LLM calls."""
    with session.lock:
        trajectory = session.warehouse.trajectory(run_id)
    return {"trajectory": trajectory, "recorded": session.recording(trajectory.recorded().gateway_run_id)}


def _search(session: Session, placement: Any, name: str, specs: Iterator[SearchSpec]) -> list[AnnotatedRun]:
    """Submit each search unit (`name`: its Prefect task's name) and gather what they found."""
    task = unit_task(name, retries=1)
    queued = list(specs)
    session.ensure_images({spec.trajectory.framework for spec in queued})
    return gather(session, [(spec, placement.submit(task, spec)) for spec in queued])


@flow(name="rootstep-counterfactual", persist_result=False)
def counterfactual(
    analyzer_model: str = DEFAULTS.annotator_model,
    frameworks: list[str] | None = None,
    benchmarks: list[str] | None = None,
    run_ids: list[str] | None = None,
    limit: int | None = None,
    budget: Budget | None = None,
    max_tokens: int | None = None,
    warehouse: str | None = None,
    limits: Limits | None = None,
    runner: Runner | None = None,
    session: Session | None = None,
    include_suspect: bool = False,
    causality: Causality | None = None,
) -> AnnotateReport:
    """Counterfactual search over the failures queue (see the module docstring).

    Args:
        analyzer_model: the analyzer LLM (any litellm / gateway model string).
        frameworks, benchmarks, run_ids: restrict the queue (None: no restriction).
        limit: at most this many failures.
        budget: per failure (`Budget`: replays, LLM calls, re-asks, candidates, live calls, seconds).
        max_tokens: the least room per analyzer answer (None: 1024); each run's answers get room for its
            longest step (`rewrite_budget`), and a cut answer is re-asked with more.
        runner: where the searches run (default: threads of this process; see `rootstep.flows._runner`).
        include_suspect: also search failures whose verdict is suspect (`verdict_suspect`).
        causality: controls and repeats per flip, and the least confidence a label keeps (`Causality`).
    """
    started = time.perf_counter()
    with open_session(warehouse, session=session, limits=limits) as session, open_runner(runner, session) as placement:
        with session.lock:
            queue = counterfactual_queue(session.warehouse, frameworks, benchmarks, run_ids, limit, include_suspect)
        runs = _search(session, placement, "counterfactual", (CounterfactualSpec(
            **_search_inputs(session, rid), analyzer_model=analyzer_model, budget=budget or Budget(),
            max_tokens=max_tokens, include_suspect=include_suspect, causality=causality or Causality())
            for rid in queue))
    return AnnotateReport(runs=runs, seconds=round(time.perf_counter() - started, 3))


@flow(name="rootstep-inject", persist_result=False)
def inject(
    perturber_model: str | None = DEFAULTS.annotator_model,
    frameworks: list[str] | None = None,
    benchmarks: list[str] | None = None,
    run_ids: list[str] | None = None,
    limit: int | None = None,
    budget: Budget | None = None,
    programmatic: bool = True,
    seed: int = 0,
    max_tokens: int | None = None,
    warehouse: str | None = None,
    limits: Limits | None = None,
    runner: Runner | None = None,
    session: Session | None = None,
    mode: InjectionMode = "auto",
    causality: Causality | None = None,
) -> AnnotateReport:
    """Fault injection over the successes queue (see the module docstring).

    Args:
        perturber_model: the perturber LLM; None uses the programmatic perturbations only.
        programmatic: also try the programmatic perturbations after the perturber's proposals.
        seed: fixes the injection points and the order of the programmatic candidates.
        max_tokens: the least room per perturber answer (see `counterfactual`).
        runner: where the injections run (default: threads of this process; see `rootstep.flows._runner`).
        mode: `auto` (team-aware, then persistent), `team_aware`, `persistent` or `one_shot`
            (`rootstep.annotation._injection`).
        causality: controls and repeats per flip, and the least confidence a label keeps (`Causality`).
    """
    started = time.perf_counter()
    with open_session(warehouse, session=session, limits=limits) as session, open_runner(runner, session) as placement:
        with session.lock:
            queue = inject_queue(session.warehouse, frameworks, benchmarks, run_ids, limit)
        runs = _search(session, placement, "inject", (InjectSpec(
            **_search_inputs(session, rid), perturber_model=perturber_model, budget=budget or Budget(), seed=seed,
            programmatic=programmatic, max_tokens=max_tokens, mode=mode, causality=causality or Causality())
            for rid in queue))
    return AnnotateReport(runs=runs, seconds=round(time.perf_counter() - started, 3))



@flow(name="rootstep-recheck", persist_result=False)
def recheck(
    analyzer_model: str = DEFAULTS.annotator_model,
    n: int = 1,
    frameworks: list[str] | None = None,
    benchmarks: list[str] | None = None,
    run_ids: list[str] | None = None,
    budget: Budget | None = None,
    max_tokens: int | None = None,
    warehouse: str | None = None,
    limits: Limits | None = None,
    runner: Runner | None = None,
    session: Session | None = None,
    causality: Causality | None = None,
) -> AnnotateReport:
    """Re-annotate `n` labelled failures from scratch (fresh analyzer samples, the agent steps asked in another,
    seeded order) and store each attempt beside the label (`recheck_of`, never in `labels`): the
    `agreement` view and `rootstep quality` report how often the (agent, step) agree."""
    started = time.perf_counter()
    with open_session(warehouse, session=session, limits=limits) as session, open_runner(runner, session) as placement:
        with session.lock:
            labels = recheck_queue(session.warehouse, frameworks, benchmarks, run_ids, n)
        runs = _search(session, placement, "recheck", (CounterfactualSpec(
            **_search_inputs(session, label.run_id), analyzer_model=analyzer_model, budget=budget or Budget(),
            max_tokens=max_tokens, include_suspect=True, causality=causality or Causality(), recheck=label)
            for label in labels))
    return AnnotateReport(runs=runs, seconds=round(time.perf_counter() - started, 3))


_recheck_flow = recheck  # `annotate`'s own `recheck` argument (how many labels) hides the flow's name there


def _timed(fn: Callable[[], AnnotateReport]) -> tuple[AnnotateReport, float]:
    clock = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - clock, 3)


def _at_once(stages: dict[str, Callable[[], AnnotateReport]], session: Session) -> dict[str, tuple[AnnotateReport, float]]:
    """Run the annotation stages (each a Prefect subflow) at the same time, each in a thread with a copy of
    this flow's context so that it stays a subflow: counterfactual searches on failures and fault injection
    on successes are independent. Returns each stage's report and its seconds, in order. A signal's
    exception stops `session` before the pool waits for the stages (their units then end at once)."""
    with ThreadPoolExecutor(max(len(stages), 1), thread_name_prefix="rootstep-stage") as pool, \
            stopped_by_signals(session):
        futures = {name: pool.submit(contextvars.copy_context().run, _timed, fn) for name, fn in stages.items()}
        return {name: future.result() for name, future in futures.items()}


def _one_after_another(stages: dict[str, Callable[[], AnnotateReport]]) -> dict[str, tuple[AnnotateReport, float]]:
    """The annotation stages in order, each with its seconds."""
    return {name: _timed(fn) for name, fn in stages.items()}


def side_by_side(annotators: list[str]) -> bool:
    """Whether the annotation stages run at once (`_at_once`): only when no annotator is the in-process CPU
    model. On the local engine two stages split the same cores, and with the agents' replays on a second engine
    every engine's threads oversubscribe them (the main job measured analyzer calls of 60-120 s for ~100 tokens)."""
    return len(annotators) > 1 and not any(m.startswith("local/") for m in annotators)


@flow(name="rootstep-annotate", persist_result=False)
def annotate(
    stages: Sequence[Stage] = ("counterfactual", "inject"),
    analyzer_model: str = DEFAULTS.annotator_model,
    perturber_model: str | None = DEFAULTS.annotator_model,
    frameworks: list[str] | None = None,
    benchmarks: list[str] | None = None,
    run_ids: list[str] | None = None,
    limit: int | None = None,
    budget: Budget | None = None,
    inject_budget: Budget | None = None,
    programmatic: bool = True,
    seed: int = 0,
    max_tokens: int | None = None,
    warehouse: str | None = None,
    limits: Limits | None = None,
    runner: Runner | None = None,
    session: Session | None = None,
    include_suspect: bool = False,
    inject_mode: InjectionMode = "auto",
    causality: Causality | None = None,
    recheck: int = 0,
) -> AnnotateReport:
    """Annotate what the queues hold: the `counterfactual` and `inject` stages (at once when neither annotator
    is the in-process model: `side_by_side`), then `recheck` of that many labels. One session and one cluster
    serve every stage. `perturber_model` None: the programmatic perturbations only; `inject_budget`: the
    injections' budget (default `budget`); the other arguments are the stages' (`counterfactual`, `inject`,
    `recheck`)."""
    started = time.perf_counter()
    report = AnnotateReport()
    with open_session(warehouse, session=session, limits=limits) as session, start_cluster(runner) as runner:
        run: dict[str, Callable[[], AnnotateReport]] = {}
        if "counterfactual" in stages:
            run["counterfactual"] = lambda: counterfactual(
                analyzer_model, frameworks=frameworks, benchmarks=benchmarks, run_ids=run_ids, limit=limit,
                budget=budget, max_tokens=max_tokens, runner=runner, session=session,
                include_suspect=include_suspect, causality=causality)
        if "inject" in stages:
            run["inject"] = lambda: inject(
                perturber_model, frameworks=frameworks, benchmarks=benchmarks, run_ids=run_ids, limit=limit,
                budget=inject_budget or budget, programmatic=programmatic, seed=seed, max_tokens=max_tokens,
                runner=runner, session=session, mode=inject_mode, causality=causality)
        models = [m for m, stage in ((analyzer_model, "counterfactual"), (perturber_model or "programmatic", "inject"))
                  if stage in stages]
        for name, (done, seconds) in (_at_once(run, session) if side_by_side(models) else _one_after_another(run)).items():
            report.runs += done.runs
            report.stage_seconds[name] = seconds
        if recheck:  # the labels just found (or any in scope), re-done from scratch
            done, seconds = _timed(lambda: _recheck_flow(
                analyzer_model, recheck, frameworks=frameworks, benchmarks=benchmarks, run_ids=run_ids, budget=budget,
                max_tokens=max_tokens, runner=runner, session=session, causality=causality))
            report.runs += done.runs
            report.stage_seconds["recheck"] = seconds
    report.seconds = round(time.perf_counter() - started, 3)
    return report
