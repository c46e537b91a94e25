"""The annotation flow `annotate` (what `rootstep annotate`, the pipeline and the deployments run), in stages:
`counterfactual` over unlabelled failures, `inject` over successes and `recheck` of labels; the functions
`counterfactual`, `inject` and `recheck` run it with one stage.

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
from typing import Any, Callable, Literal, Sequence

from prefect import flow
from pydantic import BaseModel, Field

from rootstep.annotation import Budget, InjectionMode
from rootstep.warehouse import counterfactual_queue, inject_queue, recheck_queue

from ._defaults import DEFAULTS
from ._runner import Placement, Runner, open_runner, start_cluster
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


def _searches(session: Session, placement: Placement, name: str, entries: Sequence[Any],
              spec: Callable[[Any, dict[str, Any]], SearchSpec]) -> list[AnnotatedRun]:
    """One stage's searches: a unit per queue entry (a run id, or a label for `recheck`: its `run_id`), built by
    `spec(entry, inputs)` (inputs: the run and its recorded calls), submitted as Prefect tasks named `name`,
    and what they found, stored as each finishes (`gather`)."""
    specs = [spec(entry, _search_inputs(session, getattr(entry, "run_id", entry))) for entry in entries]
    session.ensure_images({s.trajectory.framework for s in specs})
    task = unit_task(name, retries=1)
    return gather(session, [(s, placement.submit(task, s)) for s in specs])


def counterfactual(analyzer_model: str = DEFAULTS.annotator_model, **options: Any) -> AnnotateReport:
    """`annotate` with the counterfactual stage only: the failures queue (`options`: annotate's)."""
    return annotate(("counterfactual",), analyzer_model, **options)


def inject(perturber_model: str | None = DEFAULTS.annotator_model, **options: Any) -> AnnotateReport:
    """`annotate` with the fault-injection stage only: the successes queue (`options`: annotate's)."""
    return annotate(("inject",), perturber_model=perturber_model, **options)


def recheck(analyzer_model: str = DEFAULTS.annotator_model, n: int = 1, **options: Any) -> AnnotateReport:
    """Re-annotate `n` labelled failures from scratch (fresh analyzer samples, the agent steps asked in another,
    seeded order) and store each attempt beside the label (`recheck_of`, never in `labels`): the
    `agreement` view and `rootstep quality` report how often the (agent, step) agree (`options`: annotate's)."""
    return annotate((), analyzer_model, recheck=n, **options)


def _timed(fn: Callable[[], list[AnnotatedRun]]) -> tuple[list[AnnotatedRun], float]:
    clock = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - clock, 3)


def _at_once(stages: dict[str, Callable[[], list[AnnotatedRun]]], session: Session) -> dict[str, tuple[list[AnnotatedRun], float]]:
    """Run the annotation stages at the same time, each in a thread with a copy of this flow's context so that
    its units are this flow's tasks: counterfactual searches on failures and fault injection on successes
    are independent. Returns each stage's report and its seconds, in order. A signal's
    exception stops `session` before the pool waits for the stages (their units then end at once)."""
    with ThreadPoolExecutor(max(len(stages), 1), thread_name_prefix="rootstep-stage") as pool, \
            stopped_by_signals(session):
        futures = {name: pool.submit(contextvars.copy_context().run, _timed, fn) for name, fn in stages.items()}
        return {name: future.result() for name, future in futures.items()}


def _one_after_another(stages: dict[str, Callable[[], list[AnnotatedRun]]]) -> dict[str, tuple[list[AnnotatedRun], float]]:
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
    """Annotate what the queues hold, the one annotation flow (`rootstep annotate`, the pipeline, deployments;
    `counterfactual`, `inject` and `recheck` call it with one stage): the `counterfactual` stage over the failures
    queue and `inject` over the successes queue (at once when neither annotator is the in-process model:
    `side_by_side`), then `recheck` of that many labels. One session and one placement serve every stage.

    Args:
        analyzer_model / perturber_model: the analyzer and perturber LLMs (any litellm / gateway model
            string); `perturber_model` None: the programmatic perturbations only.
        frameworks, benchmarks, run_ids: restrict the queues (None: no restriction); `limit`: at most this
            many runs per stage.
        budget: per search (`Budget`: replays, LLM calls, re-asks, candidates, live calls, seconds);
            `inject_budget`: the injections' (default `budget`).
        programmatic: also try the programmatic perturbations after the perturber's proposals; `seed` fixes
            the injection points and the order of the programmatic candidates.
        max_tokens: the least room per analyzer answer (None: 1024); each run's answers get room for its
            longest step (`rewrite_budget`), and a cut answer is re-asked with more.
        runner: where the searches run (default: threads of this process; see `rootstep.flows._runner`).
        include_suspect: also search failures whose verdict is suspect (`verdict_suspect`).
        inject_mode: `auto` (team-aware, then persistent), `team_aware`, `persistent` or `one_shot`
            (`rootstep.annotation._injection`).
        causality: controls and repeats per flip, and the least confidence a label keeps (`Causality`).
        recheck: after the stages, re-annotate this many labels in scope from scratch.
    """
    started = time.perf_counter()
    budget = budget or Budget()
    causality = causality or Causality()
    report = AnnotateReport()
    with open_session(warehouse, session=session, limits=limits) as session, start_cluster(runner) as runner, \
            open_runner(runner, session) as placement:
        def queued(read: Callable[..., Sequence[Any]], *args: Any) -> Sequence[Any]:
            with session.lock:
                return read(session.warehouse, frameworks, benchmarks, run_ids, *args)

        run: dict[str, Callable[[], list[AnnotatedRun]]] = {}
        if "counterfactual" in stages:
            run["counterfactual"] = lambda: _searches(
                session, placement, "counterfactual", queued(counterfactual_queue, limit, include_suspect),
                lambda run_id, inputs: CounterfactualSpec(
                    **inputs, analyzer_model=analyzer_model, budget=budget, max_tokens=max_tokens,
                    include_suspect=include_suspect, causality=causality))
        if "inject" in stages:
            run["inject"] = lambda: _searches(
                session, placement, "inject", queued(inject_queue, limit),
                lambda run_id, inputs: InjectSpec(
                    **inputs, perturber_model=perturber_model, budget=inject_budget or budget, seed=seed,
                    programmatic=programmatic, max_tokens=max_tokens, mode=inject_mode, causality=causality))
        models = [m for m, stage in ((analyzer_model, "counterfactual"), (perturber_model or "programmatic", "inject"))
                  if stage in stages]
        for name, (done, seconds) in (_at_once(run, session) if side_by_side(models) else _one_after_another(run)).items():
            report.runs += done
            report.stage_seconds[name] = seconds
        if recheck:  # the labels just found (or any in scope), re-done from scratch
            done, seconds = _timed(lambda: _searches(
                session, placement, "recheck", queued(recheck_queue, recheck),
                lambda label, inputs: CounterfactualSpec(
                    **inputs, analyzer_model=analyzer_model, budget=budget, max_tokens=max_tokens,
                    include_suspect=True, causality=causality, recheck=label)))
            report.runs += done
            report.stage_seconds["recheck"] = seconds
    report.seconds = round(time.perf_counter() - started, 3)
    return report
