"""One search of one run, as a unit of work: its spec (`CounterfactualSpec`, `InjectSpec`: the run, its
recorded LLM calls, the search's settings), the analyzer / perturber it talks to (`annotator_chat`: through
the session's gateway, in its model's concurrency slots), the replay it calls (`search_replay`: the run's
framework adapter with the episode limits), and what it returns (`AnnotatedRun`, the replayed runs, replays
and annotations, written by the flow: `rootstep.flows.annotate`). Nothing here writes to the warehouse.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from rootstep.annotation import (
    Budget,
    InjectionMode,
    ReplayOutcome,
    answer_leaks,
    failed_turn,
    find_decisive_step,
    inject_fault,
    proven_identical,
    rewrite_budget,
    with_transcript,
)
from rootstep.benchmarks import is_suspect, sandbox_runner, suspect_reason
from rootstep.model import Annotation, Evidence, LLMCall, SearchStats, Step, Trajectory, Usage

from ._remote import worker_id
from ._replay import adapter_replay
from ._session import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL, Session
from ._unit import Outcome, UnitSpec


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
    """The least room per analyzer / perturber answer (None: 1024; see `annotator_chat`)."""
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

    def __setattr__(self, name: str, value: Any) -> None:
        """A setting (`temperature`, `max_tokens`) is the chat's: the searches set it for a call or a block."""
        if name in ("chat", "session"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.chat, name, value)

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        with self.session.scheduler.call(self.chat.model):
            return self.chat(prompt)


def annotator_chat(session: Session, model: str, max_tokens: int | None, trajectory: Trajectory,
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


def _step_call(recorded: list[LLMCall]):
    """`step -> the recorded request that produced it` (its last call's), or None."""
    by_id = {c.id: c for c in recorded}
    return lambda step: (by_id.get(step.call_ids[-1]) if step.call_ids else None)


def _step_request(recorded: list[LLMCall]):
    """`step -> the messages of the recorded request that produced it` (its last call), for `retake_step`;
    None for a step without a recorded call or whose request declared tools (a retake in plain text could
    not call them)."""
    call_of = _step_call(recorded)

    def request(step: Step) -> list[dict[str, Any]] | None:
        call = call_of(step)
        if call is None or call.request.get("tools") or not isinstance(call.request.get("messages"), list):
            return None
        return call.request["messages"]

    return request


def _step_tools(recorded: list[LLMCall]):
    """`step -> the tools the recorded request that produced it offered` (OpenAI function schemas), or None: a
    fix written as text calls of them is those calls (`written_calls`)."""
    call_of = _step_call(recorded)

    def tools(step: Step) -> list[dict[str, Any]] | None:
        call = call_of(step)
        offered = None if call is None else call.request.get("tools")
        return offered if isinstance(offered, list) and offered else None

    return tools


def replay_options(trajectory: Trajectory) -> dict[str, Any]:
    """`Adapter.replay` options of a search's replays: a multi-turn failure is replayed up to the user turn it failed
    at (`until_turn`, `failed_turn`), all that decides whether a fix or a control got past it."""
    turn = failed_turn(trajectory.verdict)
    return {} if turn is None else {"until_turn": turn}


def search_replay(session: Session, trajectory: Trajectory, captured: list[Trajectory],
               recorded: list[LLMCall] | None = None):
    """`adapter_replay` with the episode limits, remembering every replayed run for the warehouse.
    `recorded`: the run's recorded calls (`_recorded`). A multi-turn failure is replayed up to the user turn it
    failed at (`Adapter.replay(until_turn=...)`): whether that turn now passes is what decides a fix or a control
    (`FixTrial.passed_failed_turn`), and the later turns, the most of a long run, are not run."""
    from rootstep.adapters import adapter_for

    adapter_for(trajectory)  # a system file's run: its system is registered here too
    adapter = session.adapter(trajectory.framework)
    recorded = _recorded(session, trajectory, recorded)
    options = replay_options(trajectory)
    if recorded:
        options["recorded"] = recorded
    inner = adapter_replay(adapter, trajectory, **options)
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
    analyzer = annotator_chat(session, spec.analyzer_model, spec.max_tokens, trajectory, "analyzer")
    with session.scheduler.search([spec.analyzer_model, trajectory.model]):  # the meter starts once admitted
        result = find_decisive_step(trajectory, trajectory.verdict, None, analyzer,
                                    search_replay(session, trajectory, captured, recorded), spec.budget,
                                    verify=session.verifier, controls=causality.controls, repeats=causality.repeats,
                                    prior=prior, deterministic=_deterministic(trajectory, recorded),
                                    step_request=_step_request(recorded), step_tools=_step_tools(recorded),
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
    perturber = None if perturber_model is None else annotator_chat(session, perturber_model, spec.max_tokens, trajectory, "perturber")
    with session.scheduler.search([perturber_model, trajectory.model]):  # the meter starts once admitted
        result = inject_fault(trajectory, perturber, search_replay(session, trajectory, captured, recorded), spec.budget,
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
