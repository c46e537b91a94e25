"""The annotation flows: `counterfactual` over unlabelled failures, `inject` over successes.

    from rootstep.flows.annotate import counterfactual, inject
    counterfactual(analyzer_model="openai/gpt-4o-mini", budget=Budget(max_replays=4))
    inject(perturber_model="openai/gpt-4o-mini")

The queues are the warehouse's `failures` / `successes` views (collected runs only: replayed runs have
a `parent_run_id` and are in neither view), restricted to runs `rootstep` collected (`source =
'rootstep'`: imported Who&When runs cannot be replayed) and to the frameworks / benchmarks asked for:

* counterfactual: failures with no `counterfactual` annotation yet (a verified label, an `unresolved`
  or a `verifier_suspect` record take a run out of the queue), and not those whose verdict is suspect
  (the `verdict_suspect` view: the verifier may have misread a right answer) unless `include_suspect`;
* inject: successes not injected yet (a success that resisted every corruption gets an `unresolved`
  `fault_injection` record, never a label, and is not tried again).

One unit of work per run (`CounterfactualSpec` / `InjectSpec`: the run and its recorded LLM calls, read
by the flow, and the search's settings; `rootstep.flows._unit`) runs the pure search
(`find_decisive_step` / `inject_fault`) with `adapter_replay` over the run's framework adapter and
returns what it found; the flow then writes, in this order: the replays' LLM calls, the replayed runs
(`parent_run_id` = the run), the `Replay` rows, and the annotation last: the annotation is what takes
the run out of its queue, so a crash before it re-does the run's search on the next start, and ids
being content-derived, nothing written twice shows twice. Every annotation carries its cost
(`Annotation.cost`: LLM calls, tokens, USD, wall seconds, replays). The same unit runs in the flow's
threads or, with `runner=Runner(kind="dask"|"ray")`, in a cluster's worker processes.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Iterator, Literal, Sequence

from prefect import flow
from pydantic import BaseModel, Field

from rootstep.benchmarks import is_suspect, sandbox_runner, suspect_reason
from rootstep.model import Annotation, Evidence, LLMCall, SearchStats, Step, Trajectory, Usage

from rootstep.annotation import (
    Budget,
    InjectionMode,
    ReplayOutcome,
    answer_leaks,
    find_decisive_step,
    inject_fault,
    proven_identical,
    rewrite_budget,
    with_transcript,
)
from ._remote import worker_id
from ._replay import adapter_replay
from ._runner import Runner, open_runner
from ._session import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL, Limits, Session, open_session
from ._unit import Outcome, UnitSpec, gather, unit_task

Method = Literal["counterfactual", "fault_injection"]


class AnnotatedRun(BaseModel):
    """What one search produced (one row of the pipeline's table)."""

    method: Method
    run_id: str
    """The collected run searched (the failure, or the success that was corrupted)."""
    framework: str
    benchmark: str
    task_id: str
    status: Literal["labelled", "unresolved", "verifier_suspect", "verdict_suspect", "not_flipped", "error",
                    "not_causal", "unproven_earliest"]
    """`verdict_suspect`: the failure was not searched (its verdict may be the verifier's misreading:
    `reason`); `verifier_suspect`: searched, and no agent erred; `not_causal`: the only flips were matched
    by their controls; `unproven_earliest`: a causal flip with earlier agent steps left untested."""
    labelled_run_id: str | None = None
    """The run the annotation is on: the failure itself, or the corrupted replay of the success."""
    annotation_id: str | None = None
    agent: str | None = None
    step: int | None = None
    verified: bool = False
    cost: Usage = Field(default_factory=Usage)
    """What the search spent (the annotation's cost)."""
    error: str | None = None
    reason: str | None = None
    """Why a failure was left out (`verdict_suspect`), or the outcome's short reason."""
    mode: str | None = None
    """Fault injection: the mode that flipped the run (`one_step`, `persistent`, `one_shot`, `programmatic`)."""
    worker: str | None = None
    """`host:pid` of the process that ran the search (the flow's with the thread runner)."""
    confidence: float | None = None
    """The label's confidence (`rootstep.annotation._confidence`): the posterior probability that the
    intervention raised the flip rate (with it vs the controls)."""
    steps: list[int] = Field(default_factory=list)
    """Every step of a multi-step label (the primary first)."""
    recheck_of: str | None = None
    """A re-check: the label (annotation id) this search re-did from scratch; `agrees`: same agent and step."""
    agrees: bool | None = None
    stats: SearchStats = Field(default_factory=SearchStats)
    """What the search did and which limit cut it (`cut_by`)."""


class Causality(BaseModel):
    """How a flip is proven (`--controls`, `--repeats`) and which labels are kept (`--min-confidence`)."""

    controls: int = Field(default=1, ge=0)
    """Control replays per flip (the step unchanged); a flip that a control shows too is `not_causal`."""
    repeats: int = Field(default=1, ge=1)
    """Replays of the fix (and `controls` controls each) per flip: the flip counts give the confidence."""
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    """A label below this confidence is kept but not verified (out of `labels`), with a note saying why."""


def _keep(annotation: Annotation, causality: Causality) -> Annotation:
    """The annotation, unverified (out of `labels`) when its confidence is below `min_confidence`."""
    confidence = annotation.confidence
    if not annotation.verified or confidence is None or confidence >= causality.min_confidence:
        return annotation
    return annotation.model_copy(update={
        "verified": False,
        "evidence": annotation.evidence.model_copy(update={"notes": [
            *annotation.evidence.notes,
            f"confidence {confidence:g} is below --min-confidence {causality.min_confidence:g}: not verified"]}),
        "metadata": {**annotation.metadata, "below_min_confidence": causality.min_confidence}})


Annotated = Outcome[AnnotatedRun]


class SearchSpec(UnitSpec):
    """One search unit: the collected run, its recorded LLM calls (read by the flow) and the budget."""

    trajectory: Trajectory
    recorded: list[LLMCall] = Field(default_factory=list)
    """The run's recorded calls (empty: the session's journal or warehouse has them)."""
    budget: Budget = Field(default_factory=Budget)
    max_tokens: int | None = None
    """The least room per analyzer / perturber answer (None: 1024; see `_chat`)."""
    causality: Causality = Field(default_factory=Causality)

    method: ClassVar[Method]

    @property
    def run_id(self) -> str:
        return self.trajectory.id

    @property
    def label(self) -> str:
        return f"{'inject' if self.method == 'fault_injection' else self.method}/{self.run_id}"

    def failed(self, error: str) -> AnnotatedRun:
        t = self.trajectory
        return AnnotatedRun(method=self.method, run_id=t.id, framework=t.framework, benchmark=t.benchmark,
                            task_id=t.task_id, status="error", error=error)


class CounterfactualSpec(SearchSpec):
    """Find the decisive step of one failure (`find_decisive_step`)."""

    method: ClassVar[Method] = "counterfactual"
    analyzer_model: str = DEFAULT_ANNOTATOR_MODEL
    include_suspect: bool = False
    """Search the failure even when its verdict is suspect (else status `verdict_suspect`, not searched)."""
    recheck: Annotation | None = None
    """A label to re-do from scratch (`recheck`)."""

    @property
    def label(self) -> str:
        return f"recheck/{self.run_id}" if self.recheck is not None else super().label

    def run(self, session: Session) -> Annotated:
        return counterfactual_search(self, session)


class InjectSpec(SearchSpec):
    """Corrupt one success until a replay fails (`inject_fault`)."""

    method: ClassVar[Method] = "fault_injection"
    perturber_model: str | None = DEFAULT_ANNOTATOR_MODEL
    """None: the programmatic perturbations only."""
    seed: int = 0
    programmatic: bool = True
    mode: InjectionMode = "auto"

    def run(self, session: Session) -> Annotated:
        return inject_search(self, session)


class AnnotateReport(BaseModel):
    runs: list[AnnotatedRun] = Field(default_factory=list)
    seconds: float = 0.0


class _Limited:
    """An LLM (`gateway.Chat`) whose calls take a slot of its model's concurrency limit; what it is asked
    for (`model`, `usage`, `finish_reason`, `last_call_id`, `gateway_run_id`, ...) is the chat's."""

    def __init__(self, chat: Any, session: Session):
        self.chat = chat
        self.session = session

    def __getattr__(self, name: str) -> Any:
        if name == "chat":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.chat, name)

    @property
    def temperature(self) -> float:
        return self.chat.temperature

    @temperature.setter
    def temperature(self, value: float) -> None:
        self.chat.temperature = value

    @property
    def max_tokens(self) -> int:
        return self.chat.max_tokens

    @max_tokens.setter
    def max_tokens(self, value: int) -> None:
        self.chat.max_tokens = value

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        with self.session.scheduler.call(self.chat.model):
            return self.chat(prompt)


def _chat(session: Session, model: str, max_tokens: int | None, trajectory: Trajectory,
          role: Literal["analyzer", "perturber"]) -> _Limited:
    """The analyzer / perturber for one search: `max_tokens` sized to the steps it may rewrite
    (`rewrite_budget`, at least `max_tokens` when given); a cut answer is re-asked with more room.
    Every analyzer and perturber prompt asks for one JSON object: an offline model is held to it by
    llama.cpp's JSON grammar (`response_format`), which a 1.5B model otherwise breaks now and then.
    Its calls go through the session's gateway, as agent `role` of a run of their own (`<role>-<run id>-...`,
    the annotation's `evidence.transcript_run_id`): journaled, costed and stored in `llm_calls`. Each call
    may take `Limits.llm_seconds` (the gateway's provider call gets it as its `timeout`)."""
    import uuid

    from rootstep.gateway import RunContext
    from rootstep.gateway import Chat

    run_id = f"{role}-{trajectory.id}-{uuid.uuid4().hex[:8]}"
    session.gateway.register(RunContext(run_id=run_id, framework=trajectory.framework, benchmark=trajectory.benchmark,
                                        model=model, litellm_kwargs={"timeout": session.limits.llm_seconds}))
    extra = {"response_format": {"type": "json_object"}} if model.startswith("local/") else {}
    return _Limited(Chat(model, max_tokens=rewrite_budget(trajectory, floor=max_tokens or 1024), extra=extra,
                         gateway_route=session.server.base_url(run_id, role), gateway_run_id=run_id), session)


def _recorded(session: Session, trajectory: Trajectory, recorded: list[LLMCall] | None) -> list[LLMCall]:
    """The run's recorded calls: `recorded` when given, else this session's journal, else its warehouse."""
    return list(recorded) if recorded else session.recording(trajectory.recorded().gateway_run_id)


def _deterministic(trajectory: Trajectory, recorded: list[LLMCall]):
    """`step -> why` a control of that step would replay the recording (`proven_identical`)."""
    return lambda step: proven_identical(recorded, trajectory.steps[step]) if recorded else None


def _step_request(recorded: list[LLMCall]):
    """`step -> the messages of the recorded request that produced it` (its last call), for `retake_step`;
    None for a step without a recorded call or whose request declared tools (a retake in plain text could
    not call them)."""
    by_id = {c.id: c for c in recorded}

    def request(step: Step) -> list[dict[str, Any]] | None:
        call = by_id.get(step.call_ids[-1]) if step.call_ids else None
        if call is None or call.request.get("tools") or not isinstance(call.request.get("messages"), list):
            return None
        return call.request["messages"]

    return request


def _replay_fn(session: Session, trajectory: Trajectory, captured: list[Trajectory],
               recorded: list[LLMCall] | None = None):
    """`adapter_replay` with the episode limits, remembering every replayed run for the warehouse.
    `recorded`: the run's recorded calls (`_recorded`)."""
    from rootstep.adapters import adapter_for

    adapter_for(trajectory)  # a system file's run: its system is registered here too
    adapter = session.adapter(trajectory.framework)
    recorded = _recorded(session, trajectory, recorded)
    inner = adapter_replay(adapter, trajectory, **({"recorded": recorded} if recorded else {}))
    model = trajectory.model or DEFAULT_MODEL

    def replay(intervention: Any) -> tuple[Trajectory, Any, ReplayOutcome]:
        with session.episode_slot(model):
            result, verdict, cost = inner(intervention)
        captured.append(result)
        return result, verdict, cost

    return replay


def as_recheck(again: Annotation, label: Annotation) -> Annotation:
    """`again`, a search of `label`'s run done again from scratch, stored as its re-check: never verified
    itself (never in `labels`), naming the label it re-did and whether it lands on the same (agent, step)."""
    agrees = again.status == "labelled" and (again.agent, again.step) == (label.agent, label.step)
    return again.model_copy(update={"verified": False, "recheck_of": label.id, "recheck_agrees": agrees, "metadata": {
        **again.metadata, "recheck_verified": again.verified, "original": {"agent": label.agent, "step": label.step}}})


def suspect_verdict(session: Session, trajectory: Trajectory) -> str | None:
    """Why the run's failed verdict may be the verifier's misreading of a right answer: the reason stored
    with the verdict, or (runs collected before the check existed) `suspect_reason` computed now."""
    verdict = trajectory.verdict
    if verdict is None or verdict.success:
        return None
    if "suspect" in verdict.details or trajectory.recording is None:
        return is_suspect(verdict)
    return suspect_reason(trajectory.recording.task, trajectory.final_answer, trajectory.steps, verdict, session.verifier)


def counterfactual_search(spec: CounterfactualSpec, session: Session) -> Annotated:
    """The search on one failure; nothing written (`runs`: the replayed runs, in `session`'s journal).
    A failure whose verdict is suspect is not searched unless `include_suspect` (status `verdict_suspect`).
    `recheck`: a label to re-do from scratch (fresh analyzer samples, the agent steps asked in another,
    seeded order); the new annotation names it (`recheck_of`) and stays out of `labels`."""
    from rootstep.adapters import with_adapter_reads

    trajectory, run_id, causality, recheck = spec.trajectory, spec.run_id, spec.causality, spec.recheck
    trajectory = with_adapter_reads(trajectory)  # who reads whom, for the analyzer (runs stored before it was kept)
    if not spec.include_suspect and recheck is None:
        reason = suspect_verdict(session, trajectory)
        if reason is not None:
            return Annotated(row=AnnotatedRun(
                method="counterfactual", run_id=run_id, framework=trajectory.framework, benchmark=trajectory.benchmark,
                task_id=trajectory.task_id, status="verdict_suspect", reason=reason, worker=worker_id()))
    captured: list[Trajectory] = []
    recorded = _recorded(session, trajectory, spec.recorded)
    prior = None
    if recheck is not None:
        import random

        prior = [s.index for s in trajectory.steps if s.kind == "agent"]
        random.Random(f"recheck:{recheck.id}").shuffle(prior)
    analyzer = _chat(session, spec.analyzer_model, spec.max_tokens, trajectory, "analyzer")
    with session.scheduler.search([spec.analyzer_model, trajectory.model]):  # the meter starts once admitted
        result = find_decisive_step(trajectory, trajectory.verdict, None, analyzer,
                                    _replay_fn(session, trajectory, captured, recorded), spec.budget,
                                    verify=session.verifier, controls=causality.controls, repeats=causality.repeats,
                                    prior=prior, deterministic=_deterministic(trajectory, recorded),
                                    step_request=_step_request(recorded),
                                    run_program=sandbox_runner(session.verification_sandbox))
    a = _keep(result.annotation, causality)
    agrees = None
    if recheck is not None:
        a = as_recheck(a, recheck)
        agrees = a.recheck_agrees
    run = AnnotatedRun(
        method="counterfactual", run_id=run_id, framework=trajectory.framework, benchmark=trajectory.benchmark,
        task_id=trajectory.task_id, status=a.status, labelled_run_id=a.run_id, annotation_id=a.id, agent=a.agent,
        step=a.step, verified=a.verified, cost=a.cost, worker=worker_id(),
        reason=None if a.status == "labelled" else a.evidence.reason, confidence=a.confidence,
        steps=list(a.steps), recheck_of=None if recheck is None else recheck.id, agrees=agrees,
        stats=result.stats,
    )
    return Annotated(row=run, runs=captured, replays=result.replays, annotations=[a])


def inject_search(spec: InjectSpec, session: Session) -> Annotated:
    """Fault injection on one success; nothing written (see `counterfactual_search`)."""
    from rootstep.adapters import adapter_for
    from rootstep.adapters.base import with_reads

    trajectory, run_id, causality, perturber_model = spec.trajectory, spec.run_id, spec.causality, spec.perturber_model
    adapter = adapter_for(trajectory)
    trajectory = with_reads(trajectory, adapter.reads(trajectory))
    captured: list[Trajectory] = []
    recorded = _recorded(session, trajectory, spec.recorded)
    perturber = None if perturber_model is None else _chat(session, perturber_model, spec.max_tokens, trajectory, "perturber")
    with session.scheduler.search([perturber_model, trajectory.model]):  # the meter starts once admitted
        result = inject_fault(trajectory, perturber, _replay_fn(session, trajectory, captured, recorded), spec.budget,
                              programmatic=spec.programmatic, seed=spec.seed, mode=spec.mode,
                              independent_agents=adapter.independent_agents, answer_agents=adapter.answer_agents,
                              verify=session.verifier, controls=causality.controls, repeats=causality.repeats,
                              deterministic=_deterministic(trajectory, recorded),
                              run_program=sandbox_runner(session.verification_sandbox))
    a = None if result.annotation is None else _keep(result.annotation, causality)
    run = AnnotatedRun(
        method="fault_injection", run_id=run_id, framework=trajectory.framework, benchmark=trajectory.benchmark,
        task_id=trajectory.task_id, status="not_flipped" if a is None else a.status,
        labelled_run_id=None if a is None else a.run_id, annotation_id=None if a is None else a.id,
        agent=None if a is None else a.agent, step=None if a is None else a.step,
        verified=a is not None and a.verified, cost=result.cost, worker=worker_id(), mode=result.mode,
        confidence=None if a is None else a.confidence, stats=result.stats,
    )
    return Annotated(row=run, runs=captured, replays=result.replays,
                     annotations=[a if a is not None else with_transcript(not_flipped_record(trajectory, result, perturber_model),
                                                                          result.asked, perturber)])


def not_flipped_record(trajectory: Trajectory, result: Any, perturber_model: str | None) -> Annotation:
    """The record that a success resisted injection (status `unresolved`, on the success itself, never a
    label): it takes the run out of the queue even when no replay was tried (the perturber found no
    corruption at any point), and its cost counts in `quality`'s cost per label."""
    not_causal = [x for x in result.attempts if x.not_causal]
    leaks = len(answer_leaks(result.asked))
    return Annotation(run_id=trajectory.id, framework=trajectory.framework, benchmark=trajectory.benchmark,
                      method="fault_injection", status="not_causal" if not_causal else "unresolved", verified=False,
                      annotator=perturber_model or "programmatic",
                      evidence=Evidence(reason=(f"a corruption of step {not_causal[0].corruption.step} failed the run, "
                                                f"but {not_causal[0].not_causal}") if not_causal else
                                        "no corruption flipped the run", replay_ids=[r.id for r in result.replays],
                                        notes=result.notes),
                      cost=result.cost, answer_leaks=leaks, search_stats=result.stats,
                      metadata={"points": result.points, "not_causal_steps": [x.corruption.step for x in not_causal]})


def _search_inputs(session: Session, run_id: str) -> dict[str, Any]:
    """What a search of `run_id` reads, for its spec: the run and its recorded LLM calls."""
    with session.lock:
        trajectory = session.warehouse.trajectory(run_id)
    return {"trajectory": trajectory, "recorded": session.recording(trajectory.recorded().gateway_run_id)}


def _scope(column_prefix: str, frameworks: Sequence[str] | None, benchmarks: Sequence[str] | None,
           run_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    where, params = [f"{column_prefix}.source = 'rootstep'"], []
    for column, values in (("framework", frameworks), ("benchmark", benchmarks), ("id", run_ids)):
        if values is not None:
            if not values:
                return "false", []
            where.append(f"{column_prefix}.{column} IN ({', '.join('?' for _ in values)})")
            params += list(values)
    return " AND ".join(where), params


def _queue(session: Session, view: str, done: str, frameworks: Sequence[str] | None, benchmarks: Sequence[str] | None,
           run_ids: Sequence[str] | None, limit: int | None, extra: str = "true") -> list[str]:
    """Ids of the runs of `view` (alias `v`) in scope, meeting `extra`, for which the `done` subquery finds nothing."""
    where, params = _scope("v", frameworks, benchmarks, run_ids)
    where += f" AND ({extra})"
    sql = (f"SELECT v.id FROM {view} v WHERE {where} AND NOT EXISTS ({done}) "
           "ORDER BY v.framework, v.benchmark, v.task_id, v.id")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    with session.lock:
        return [r["id"] for r in session.warehouse.rows(sql, params)]


def counterfactual_queue(session: Session, frameworks: Sequence[str] | None = None, benchmarks: Sequence[str] | None = None,
                         run_ids: Sequence[str] | None = None, limit: int | None = None,
                         include_suspect: bool = False) -> list[str]:
    """Failures (collected, not replayed) with no counterfactual annotation yet; without `include_suspect`,
    not those whose verdict is suspect (the `verdict_suspect` view)."""
    extra = "true" if include_suspect else "json_extract_string(v.verdict_details, '$.suspect') IS NULL"
    return _queue(session, "failures", "SELECT 1 FROM annotations a WHERE a.run_id = v.id AND a.method = 'counterfactual'",
                  frameworks, benchmarks, run_ids, limit, extra)


def inject_queue(session: Session, frameworks: Sequence[str] | None = None, benchmarks: Sequence[str] | None = None,
                 run_ids: Sequence[str] | None = None, limit: int | None = None) -> list[str]:
    """Successes (collected, not replayed) not injected yet: no fault-injection replay, and no record that
    one resisted injection (`not_flipped_record`)."""
    return _queue(session, "successes", "SELECT 1 FROM replays r WHERE r.run_id = v.id AND r.purpose = 'fault_injection' "
                  "UNION ALL SELECT 1 FROM annotations a WHERE a.run_id = v.id AND a.method = 'fault_injection'",
                  frameworks, benchmarks, run_ids, limit)


def _search(session: Session, placement: Any, name: str, specs: Iterator[SearchSpec]) -> list[AnnotatedRun]:
    """Submit each search unit (`name`: its Prefect task's name) and gather what they found."""
    task = unit_task(name, retries=1)
    return gather(session, [(spec, placement.submit(task, spec)) for spec in specs])


@flow(name="rootstep-counterfactual", persist_result=False)
def counterfactual(
    analyzer_model: str = DEFAULT_ANNOTATOR_MODEL,
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
        queue = counterfactual_queue(session, frameworks, benchmarks, run_ids, limit, include_suspect)
        runs = _search(session, placement, "counterfactual", (CounterfactualSpec(
            **_search_inputs(session, rid), analyzer_model=analyzer_model, budget=budget or Budget(),
            max_tokens=max_tokens, include_suspect=include_suspect, causality=causality or Causality())
            for rid in queue))
    return AnnotateReport(runs=runs, seconds=round(time.perf_counter() - started, 3))


@flow(name="rootstep-inject", persist_result=False)
def inject(
    perturber_model: str | None = DEFAULT_ANNOTATOR_MODEL,
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
        queue = inject_queue(session, frameworks, benchmarks, run_ids, limit)
        runs = _search(session, placement, "inject", (InjectSpec(
            **_search_inputs(session, rid), perturber_model=perturber_model, budget=budget or Budget(), seed=seed,
            programmatic=programmatic, max_tokens=max_tokens, mode=mode, causality=causality or Causality())
            for rid in queue))
    return AnnotateReport(runs=runs, seconds=round(time.perf_counter() - started, 3))



def recheck_queue(session: Session, frameworks: Sequence[str] | None = None, benchmarks: Sequence[str] | None = None,
                  run_ids: Sequence[str] | None = None, limit: int | None = None) -> list[Annotation]:
    """Counterfactual labels (the `labels` view) in scope not re-checked yet, most recent first."""
    from rootstep.warehouse import annotation_from_row

    where, params = _scope("r", frameworks, benchmarks, run_ids)
    sql = (f"SELECT a.* FROM labels l JOIN annotations a ON a.id = l.id JOIN runs r ON r.id = l.run_id WHERE {where} "
           "AND l.method = 'counterfactual' AND NOT EXISTS (SELECT 1 FROM annotations x WHERE x.run_id = l.run_id "
           "AND x.recheck_of = l.id) ORDER BY l.created_at DESC, l.id")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    with session.lock:
        return [annotation_from_row(row) for row in session.warehouse.rows(sql, params)]


@flow(name="rootstep-recheck", persist_result=False)
def recheck(
    analyzer_model: str = DEFAULT_ANNOTATOR_MODEL,
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
        labels = recheck_queue(session, frameworks, benchmarks, run_ids, n)
        runs = _search(session, placement, "recheck", (CounterfactualSpec(
            **_search_inputs(session, label.run_id), analyzer_model=analyzer_model, budget=budget or Budget(),
            max_tokens=max_tokens, include_suspect=True, causality=causality or Causality(), recheck=label)
            for label in labels))
    return AnnotateReport(runs=runs, seconds=round(time.perf_counter() - started, 3))
