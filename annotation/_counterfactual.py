"""Counterfactual search on a failed run (AgenTracer, Algorithm 1 lines 1-8): find the decisive step.

The decisive step is the EARLIEST agent step whose correction turns the failure into a success. The
analyzer LLM proposes `(step, agent, reason, fix)`; the proposal is validated (the step exists, is an
agent step, the agent is the one who took it, the fix changes it) and re-asked with the problem stated;
the fix is forced as an `Intervention(kind="fix")` and the run re-simulated; Omega decides.

Search order (`find_decisive_step`):
0. *grounded*: the first agent step whose correction the task itself gives (its code fails the tests: the
   reference solution; it first states the run's wrong answer: the task's answer in its place) is replayed with
   that correction before the analyzer is asked;
1. *ranked*: the analyzer's own diagnosis, then new diagnoses with the failed ones fed back, up to
   `Budget.max_candidates`, until one succeeds at step t;
2. *earlier*: every untried agent step before t in ascending order (all untried steps when nothing
   succeeded), each with the step-specific prompt; the analyzer may declare a step correct (no
   replay). The first success there is the earliest, since every step before it has been examined; the scan
   stops at the first step it leaves open (every fix refused, not judged correct: `Budget.max_open_steps`),
   after which no flip could be a label.
A label is verified only when a replay turned the failure into a success with a fix that changed the
agent's work: a fix that re-states the step's own answer in another form (`same_answer`, judged by the
task's verifier) proves the check, not the agent, wrong, and verifies nothing. The analyzer may also
answer that no agent erred (the run is right and the check is wrong): with the step that gives the right
answer, which the verifier is asked to confirm, that is the outcome `verifier_suspect`, never a label.
Otherwise the run is `unresolved` with every attempt as evidence. `sequential_scan` is the naive baseline: a fix for every
agent step from step 0, each re-simulated, no ranking and no "this step is fine".
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field
from rootstep.benchmarks import (
    RunProgram,
    Verify,
    is_suspect,
)
from rootstep.model import (
    Annotation,
    Evidence,
    Replay,
    SearchStats,
    Trajectory,
    Verdict,
)

from ._budget import Budget, Meter
from ._propose import (
    Asked,
    ChatLike,
    Diagnosis,
    FixProposer,
    NoAgentError,
    StepRequest,
    StepTools,
    TaskContext,
    answer_leaks,
    answer_step,
    failed_turn,
    failure_horizon,
    model_name,
    with_transcript,
    work_key,
)
from ._trial import Attempt, Deterministic, FixTrial, ReplayFn

SearchName = Literal["rootstep", "sequential"]


class CounterfactualResult(BaseModel):
    """The outcome of a search: the annotation (verified label or unresolved) and everything behind it."""

    annotation: Annotation
    replays: list[Replay] = Field(default_factory=list)
    """One row per replay tried, in order (purpose `counterfactual`)."""
    attempts: list[Attempt] = Field(default_factory=list)
    declined: list[Diagnosis] = Field(default_factory=list)
    """Steps the analyzer judged correct when asked about them (no replay spent)."""
    asked: list[Asked] = Field(default_factory=list)
    """Every analyzer answer, rejected ones with their problem."""
    fixed_run: Trajectory | None = None
    """The re-simulated run that succeeded with the label's fix."""
    no_agent_error: NoAgentError | None = None
    """Set when the analyzer found that no agent erred (the annotation's status is `verifier_suspect`)."""
    notes: list[str] = Field(default_factory=list)
    stats: SearchStats = Field(default_factory=SearchStats)
    """What the search did and the limit that cut it, if any (`Meter.stats`)."""

    @property
    def verified(self) -> bool:
        return self.annotation.verified

    @property
    def step(self) -> int | None:
        return self.annotation.step

    @property
    def agent(self) -> str | None:
        return self.annotation.agent


def _outcome(a: Attempt, failed_at: int | None) -> str:
    """What an attempt's replay came to, as its evidence note says it (`failed_at`: the turn the run failed at)."""
    if a.success:
        if a.later_turn is None:
            return "succeeded"
        return f"got past turn {failed_at}" + ("" if a.stopped_after_turn is not None else f", failed at turn {a.later_turn}")
    if a.not_causal:
        return f"succeeded, not causal: {a.not_causal}"
    if a.presentation_only:
        return f"succeeded, not accepted: {a.presentation_only}"
    return "diverged" if a.replay.divergence else "replay error" if a.replay.error else "still failed"


class _Search:
    """One counterfactual search: its phases in order (`by_prior`, `ranked`, `scan`, `joint`), what they tried,
    and the result. Proposing is `FixProposer`'s (`_propose`), replaying `FixTrial`'s (`_trial`)."""

    def __init__(self, trajectory: Trajectory, verdict: Verdict | None, context: TaskContext, analyzer: ChatLike,
                 replay: ReplayFn, budget: Budget, max_prompt_chars: int, verify: Verify | None = None,
                 controls: int = 1, repeats: int = 1, deterministic: Deterministic | None = None,
                 step_request: StepRequest | None = None, run_program: RunProgram | None = None,
                 early_controls: bool = False, step_tools: StepTools | None = None):
        if not trajectory.steps:
            raise ValueError(f"run {trajectory.id} has no steps to correct")
        verdict = verdict if verdict is not None else trajectory.verdict
        if verdict is not None and verdict.success:
            raise ValueError(f"run {trajectory.id} succeeded; counterfactual search needs a failure (inject faults instead)")
        self.trajectory = trajectory
        self.verdict = verdict
        self.analyzer = analyzer
        self.controls, self.repeats = controls, repeats
        self.horizon = failure_horizon(trajectory, verdict)
        """Steps from here on come after the failure was decided (a failed turn's check): never candidates."""
        self.meter = Meter(budget.for_run(sum(1 for s in trajectory.steps[:self.horizon] if s.kind == "agent")))
        program = None if run_program is None else functools.lru_cache(maxsize=256)(run_program)
        """`run_program`, each program run once per search: a fix's program is read by the leak, wrong-answer,
        gives-answer and same-answer checks, each of which ran it in a sandbox."""
        self.attempts: list[Attempt] = []
        self.declined: list[Diagnosis] = []
        self.asked: list[Asked] = []
        self.notes: list[str] = []
        self.best: Attempt | None = None
        self.fixed_run: Trajectory | None = None
        self.no_agent_error: NoAgentError | None = None
        self.propose = FixProposer(trajectory, verdict, context, analyzer, self.meter, self.asked, self.notes,
                                   max_prompt_chars, verify, program, step_request, step_tools)
        self.trial = FixTrial(trajectory, None if verdict is None else verdict.success, context.task, verify, program,
                              replay, self.meter, controls, repeats, deterministic, early_controls,
                              failed_turn(verdict))

    # -------------------------------------------------------------- what was tried

    def failed(self) -> list[dict[str, Any]]:
        out = []
        for a in self.attempts:
            if a.success:
                continue
            r = a.replay
            outcome = (f"the run succeeded with the fix, but {a.not_causal}: not shown to be the cause" if a.not_causal else
                       "replay diverged from the recording" if r.divergence else
                       f"the replay could not run (infrastructure error, not a verdict on the fix; it may be "
                       f"proposed again): {r.error[:200]}" if r.error else
                       f"the run succeeded, but {a.presentation_only}: not accepted, a fix must correct the agent's "
                       "work" if a.presentation_only else
                       "the re-simulated run still failed" + (
                           ", the later agents repeating the run's original final answer" if a.repeated else "")
                       + (f" ({a.said})" if a.said else ""))
            fix = a.diagnosis.fix if len(a.diagnosis.fix) <= 600 else a.diagnosis.fix[:600] + " ..."
            out.append({"step": a.diagnosis.step, "agent": a.diagnosis.agent, "fix": fix, "outcome": outcome})
        return out

    def decided(self) -> list[Attempt]:
        """Single-step attempts whose replay decided something (one that raised, an infrastructure error,
        did not: its fix may be proposed and replayed again)."""
        return [a for a in self.attempts if a.replay.error is None and not a.joint]

    def tested(self) -> set[tuple[int, str]]:
        return {(a.diagnosis.step, work_key(a.diagnosis.fix)) for a in self.decided()}

    def tried_steps(self) -> set[int]:
        return {a.diagnosis.step for a in self.decided()} | {d.step for d in self.declined}

    def attempt(self, diagnosis: Diagnosis, joint: Sequence[Diagnosis] = (), early_control: bool = False) -> Attempt:
        """Replay `diagnosis`'s fix (`FixTrial.attempt`) and keep it; the earliest success is the best."""
        attempt, result = self.trial.attempt(diagnosis, joint, early_control)
        self.attempts.append(attempt)
        if attempt.success and (self.best is None or diagnosis.step < self.best.diagnosis.step):
            self.best, self.fixed_run = attempt, result
        return attempt

    # -------------------------------------------------------------- phases

    def ranked(self) -> None:
        for _ in range(self.meter.budget.max_candidates):
            stop = self.meter.cannot_replay("the ranked search")
            if stop:
                self.notes.append(f"ranked search stopped: {stop}")
                return
            diagnosis, why = self.propose.ask_ranked(self.failed(), self.tested())
            if diagnosis is None:
                self.notes.append(f"ranked search stopped: {why}")
                return
            if isinstance(diagnosis, NoAgentError):
                self.no_agent_error = self.propose.confirm(diagnosis)
                return
            if self.attempt(diagnosis, early_control=True).success:
                return

    def grounded(self) -> None:
        """Before the analyzer is asked: the first agent step whose correction the task itself gives
        (`FixProposer.grounded`) gets it, replayed with its control beside it. The scan corrects such a step this way
        with no analyzer call anyway; tried first, a flip there leaves the analyzer only the steps before it to clear,
        where the ranked call would have named that step and written a fix the checks refuse (on the main job of
        2026-12-01, 5 analyzer calls and no replay for GSM8K test-474, whose coder's program printed 25.0)."""
        diagnosis = self.propose.grounded(self.tested())
        if diagnosis is None:
            return
        stop = self.meter.cannot_replay(f"the task-grounded correction of step {diagnosis.step}")
        if stop:
            self.notes.append(f"task-grounded correction of step {diagnosis.step} not tried: {stop}")
            return
        self.attempt(diagnosis, early_control=True)

    def by_prior(self, prior: Sequence[int]) -> None:
        """The ranked phase with a prior: ask about the prior's agent steps in its order (the analyzer may judge
        one correct: no replay), at most `max_candidates` of them, until a fix succeeds."""
        agent_steps = {s.index for s in self.trajectory.steps[:self.horizon] if s.kind == "agent"}
        for index in [i for i in dict.fromkeys(prior) if i in agent_steps][: self.meter.budget.max_candidates]:
            what = f"the prior search before step {index}"
            stop = self.meter.cannot_replay(what) or self.meter.cannot_ask(what)
            if stop:
                self.notes.append(f"prior search stopped before step {index}: {stop}")
                return
            diagnosis, why = self.propose.ask_at(self.trajectory.steps[index], self.failed(), self.tested(), require_fix=False, source="prior")
            if diagnosis is None:
                self.notes.append(f"step {index}: no correction tried ({why})")
            elif diagnosis.declined:
                self.declined.append(diagnosis)
            elif self.attempt(diagnosis, early_control=True).success:
                return

    def scan(self, *, require_fix: bool, source: Literal["earlier", "sequential"]) -> None:
        if self.no_agent_error is not None:
            return
        limit = self.best.diagnosis.step if self.best is not None else self.horizon
        left_open: list[int] = []
        for step in self.trajectory.steps[:limit]:
            if step.kind != "agent":
                continue
            what = f"the {source} scan before step {step.index}"
            if step.index in self.tried_steps():
                # a step tried with the analyzer's fixes that first states the run's wrong answer gets the task's answer
                # in its place too before the scan passes it: a later step given that stronger correction would
                # otherwise take the label (AgentPrune MATH-500 183, seed 23: the ranked step 1's fixes failed, the
                # programmer's step 2 got the answer and flipped); unless a fix stating a right answer was tried there
                # already (a flaky team's ranked `Answer: <right>`). The budget is asked only when there is such a
                # replay to make: a step with nothing left to try stops nothing.
                verdicts = [self.propose.stated(a.diagnosis.fix) for a in self.decided() if a.diagnosis.step == step.index]
                passed = self.closed_steps()
                if any(v is not None and v.success for v in verdicts) or self.propose.from_answer(step, passed) is None:
                    continue
                stop = self.meter.cannot_replay(what)
                if stop:
                    self.notes.append(f"{source} scan stopped before step {step.index}: {stop}")
                    return
                answered = self.propose.answered(step, self.tested(), source, passed=passed)
                if answered is not None and self.attempt(answered).success:
                    return
                continue
            stop = self.meter.cannot_replay(what) or self.meter.cannot_ask(what)
            if stop:
                self.notes.append(f"{source} scan stopped before step {step.index}: {stop}")
                return
            diagnosis, why = self.propose.ask_at(step, self.failed(), self.tested(), require_fix=require_fix, source=source,
                                                 passed=self.closed_steps())
            if diagnosis is None:
                self.notes.append(f"step {step.index}: no correction tried ({why})")
                left_open.append(step.index)
                stop = self.meter.cannot_pass(left_open, f"the {source} scan after step {step.index}")
                if stop:
                    self.notes.append(f"{source} scan stopped after step {step.index}: {stop}")
                    return
                continue
            if diagnosis.declined:
                self.declined.append(diagnosis)
                continue
            if self.attempt(diagnosis).success:
                return

    def joint(self) -> None:
        """Several causes: when fixes at two or more erring steps before the label (any steps when nothing
        flipped) each failed, replay them all at once. A fix at one step is undone when other agents that
        did not read it (AgentPrune's graph: `Step.metadata["reads"]`) or that repeat the error (the replay
        ended with the run's original answer: `repeated`) carry the same mistake on; only the fix of every
        step that carries it shows the cause. A joint flip that the controls confirm is a multi-step label
        (the set; the earliest step primary), and it replaces a single-step label on a later step (the last
        aggregator's). A step the analyzer judged correct is never in the set."""
        if self.no_agent_error is not None:
            return
        limit = self.best.diagnosis.step if self.best is not None else self.horizon
        erring: dict[int, Diagnosis] = {}
        for a in self.decided():
            if a.replay.success_after is False and a.diagnosis.step < limit:
                erring[a.diagnosis.step] = a.diagnosis  # the last fix tried at that step
        if len(erring) < 2:
            return
        open_before = self.open_earlier(min(erring))
        if open_before:
            self.notes.append(f"joint fix of steps {sorted(erring)} not tried: steps {open_before} before them were left "
                              "open, so it could not be a label")
            return
        stop = self.meter.cannot_replay(f"the joint fix of steps {sorted(erring)}")
        if stop:
            self.notes.append(f"joint fix of steps {sorted(erring)} not tried: {stop}")
            return
        first, *rest = [erring[i].model_copy(update={"source": "joint"}) for i in sorted(erring)]
        self.attempt(first, rest)

    def closed_steps(self) -> set[int]:
        """Steps replayed with a fix that decided something and did not flip, or judged correct by the analyzer."""
        return ({a.diagnosis.step for a in self.decided() if a.replay.success_after is not None and not a.success}
                | {d.step for d in self.declined})

    def open_earlier(self, step: int) -> list[int]:
        """Agent steps before `step` that were neither replayed with a fix that decided something nor judged
        correct by the analyzer: while any remain, `step` is not established as the earliest."""
        closed = self.closed_steps()
        return [s.index for s in self.trajectory.steps[:step] if s.kind == "agent" and s.index not in closed]

    def reformatted_answer(self) -> Attempt | None:
        """A presentation-only success that shows the check, not an agent, was wrong: on the step that gives
        the run's final answer (`answer_step`), or on any step when the verdict was already suspect. (A
        re-formatted earlier step that a live team then carries to success says nothing about the check.)"""
        final = answer_step(self.trajectory)
        for a in self.attempts:
            if a.presentation_only and (is_suspect(self.verdict) or (final is not None and a.diagnosis.step == final.index)):
                return a
        return None

    # -------------------------------------------------------------- result

    def result(self, search: SearchName) -> CounterfactualResult:
        t = self.trajectory
        used = {r.id for a in self.attempts if a.check is not None for r in a.check.controls}
        spare = [row for rows in self.trial.controls_by_step.values() for row, _ in rows if row.id not in used]
        replays = list({r.id: r for a in self.attempts for r in a.rows()}.values())  # in order, each once
        tried = [
            ("steps " + "+".join(map(str, a.steps)) if a.joint else f"step {a.diagnosis.step}")
            + f" ({a.diagnosis.agent}, {a.diagnosis.source}"
            + {"rewrite": ", written from the analyzer's description",
               "retake": ", retaken by the analyzer's model in the agent's seat",
               "reference": ", its failing code replaced by the task's reference solution",
               "answer": ", its wrong answer replaced by the task's reference answer",
               "calls": ", its calls replaced by the failed turn's ground-truth calls"}.get(a.diagnosis.written or "", "") + "): "
            + _outcome(a, self.trial.failed_at) + f" [{a.replay.id}]"
            + (f"; controls: {a.check.effect.control_flips}/{a.check.effect.control_trials} flipped"
               + (f" ({a.check.proven_identical} proven identical: {a.check.proven_why})" if a.check.proven_identical else "")
               if a.check is not None else "")
            for a in self.attempts
        ]
        leaks = answer_leaks(self.asked)
        evidence_notes = tried + [f"step {d.step} ({d.agent}): judged correct by the analyzer" for d in self.declined] + [
            f"step {r.intervention.step if r.intervention else '?'}: control replayed beside a fix that did not flip "
            f"({'flipped' if r.success_after else 'still failed' if r.success_after is False else 'decided nothing'}) "
            f"[{r.id}]" for r in spare] + [
            f"answer_leak rejected: {(x.problem or '')[len('answer_leak: '):]}" for x in leaks] + self.notes
        metadata: dict[str, Any] = {
            "search": search,
            "attempted_steps": [a.diagnosis.step for a in self.attempts],
            "declined_steps": [d.step for d in self.declined],
            "analyzer_calls": self.meter.asked.llm_calls,
            "live_calls": self.meter.replayed.llm_calls,
            "replayed_calls": self.meter.replayed.replayed_calls,
            "control_replays": self.meter.control_replays,
            "controls": self.controls,
            "repeats": self.repeats,
            "not_causal_steps": [a.diagnosis.step for a in self.attempts if a.not_causal],
        }
        stats = self.meter.stats()
        if self.meter.cut is not None:
            evidence_notes.append(f"cut: {self.meter.cut.reason} (it stopped {self.meter.cut.stopped})")
        common: dict[str, Any] = dict(run_id=t.id, framework=t.framework, benchmark=t.benchmark, method="counterfactual",
                      annotator=model_name(self.analyzer, "analyzer"), cost=self.meter.cost(),
                      answer_leaks=len(leaks), search_stats=stats)
        finding = self.no_agent_error
        if finding is not None:
            where = "the final answer" if finding.answer_step is None else f"step {finding.answer_step}"
            evidence_notes.append(f"the analyzer found no agent error; {where} gives the answer: "
                                  + (f"the verifier accepts it ({finding.confirmed})" if finding.confirmed
                                     else "NOT confirmed by the verifier"))
            metadata.update(answer_step=finding.answer_step, confirmed=finding.confirmed is not None,
                            outcome="analyzer: no agent error")
            annotation = Annotation(
                **common, status="verifier_suspect", verified=False,
                evidence=Evidence(reason=finding.reason or "no agent error: the run is correct and the check is wrong",
                                  replay_ids=[r.id for r in replays], notes=evidence_notes),
                metadata=metadata,
            )
        elif self.best is None and (a := self.reformatted_answer()) is not None:
            suspect = is_suspect(self.verdict)
            metadata.update(outcome="presentation-only fix succeeded")
            annotation = Annotation(
                **common, status="verifier_suspect", verified=False, proof_replay_id=a.replay.id,
                evidence=Evidence(
                    reason=f"re-formatting step {a.diagnosis.step}'s answer turned the run into a success "
                           f"({a.presentation_only})" + (f"; the verdict was suspect: {suspect}" if suspect else
                                                         "; that step gives the run's final answer"),
                    fix=a.diagnosis.fix, replay_ids=[r.id for r in replays], notes=evidence_notes),
                metadata=metadata,
            )
        elif self.best is not None:
            best = self.best
            assert best.check is not None
            open_steps = self.open_earlier(best.diagnosis.step)
            metadata.update(fixed_run_id=best.replay.result_run_id,
                            agents=[best.diagnosis.agent, *(d.agent for d in best.joint)], untested_earlier=open_steps)
            fix = best.diagnosis.fix if not best.joint else "\n\n".join(
                f"[step {d.step}, {d.agent}]\n{d.fix}" for d in [best.diagnosis, *best.joint])
            if open_steps:
                evidence_notes.append(f"earliest not established: agent step(s) {open_steps} before step "
                                      f"{best.diagnosis.step} were neither tested nor judged correct")
            if best.later_turn is not None:
                stopped = best.stopped_after_turn is not None
                evidence_notes.append(
                    f"the fix got the run past user turn {self.trial.failed_at}, where it failed; "
                    + ("the replay was stopped there (later turns are not replayed)" if stopped
                       else f"the replay failed later, at turn {best.later_turn}")
                    + " (the label is the decisive error of the first failure)")
            annotation = Annotation(
                **common, agent=best.diagnosis.agent, step=best.diagnosis.step, verified=not open_steps,
                status="labelled" if not open_steps else "unproven_earliest", steps=best.steps,
                proof_replay_id=best.replay.id, edit=best.edit,
                flip_check=best.check.summary(), confidence=best.check.effect.confidence,
                earliest="established" if not open_steps else "unproven",
                fixed_turn=None if best.later_turn is None else self.trial.failed_at,
                evidence=Evidence(reason=best.diagnosis.reason, fix=fix,
                                  replay_ids=[r.id for r in replays], notes=evidence_notes),
                metadata=metadata,
            )
        elif (a := next((x for x in self.attempts if x.not_causal), None)) is not None:
            metadata.update(outcome="not_causal")
            annotation = Annotation(
                **common, status="not_causal", verified=False, agent=a.diagnosis.agent, step=a.diagnosis.step,
                proof_replay_id=a.replay.id, steps=a.steps, flip_check=None if a.check is None else a.check.summary(),
                evidence=Evidence(reason=f"a fix at step {a.diagnosis.step} flipped the run, but {a.not_causal}",
                                  fix=a.diagnosis.fix, replay_ids=[r.id for r in replays], notes=evidence_notes),
                metadata=metadata,
            )
        else:
            annotation = Annotation(
                **common, status="unresolved", verified=False,
                evidence=Evidence(reason="no tested correction turned the failure into a success",
                                  replay_ids=[r.id for r in replays], notes=evidence_notes),
                metadata=metadata,
            )
        annotation = with_transcript(annotation, self.asked, self.analyzer)
        return CounterfactualResult(annotation=annotation, replays=replays, attempts=self.attempts,
                                    declined=self.declined, asked=self.asked, fixed_run=self.fixed_run,
                                    no_agent_error=finding, notes=self.notes, stats=stats)


def find_decisive_step(
    trajectory: Trajectory,
    verdict: Verdict | None = None,
    task_context: TaskContext | None = None,
    analyzer: ChatLike | None = None,
    replay: ReplayFn | None = None,
    budget: Budget | None = None,
    *,
    max_prompt_chars: int = 24_000,
    verify: Verify | None = None,
    prior: Sequence[int] | None = None,
    controls: int = 1,
    repeats: int = 1,
    deterministic: Deterministic | None = None,
    step_request: StepRequest | None = None,
    run_program: RunProgram | None = None,
    early_controls: bool = True,
    step_tools: StepTools | None = None,
) -> CounterfactualResult:
    """Find the earliest agent step whose correction turns the failed `trajectory` into a success.

    Args:
        trajectory: the failed run (its `verdict`, when `verdict` is None, must not be a success).
        verdict: Omega's verdict on the run; its details are the analyzer's environment feedback.
        task_context: task text, ground truth and extra feedback; defaults to the trajectory's own.
        analyzer: the analyzer LLM (`gateway.Chat` or any `prompt -> text` callable).
        replay: re-simulates the run with an intervention: `(Trajectory, Verdict, ReplayOutcome)`.
            Prefix replay from the recording is what makes late interventions cheap.
        budget: limits of this search (`Budget()` by default).
        max_prompt_chars: the run's step texts are cut, longest first, to fit (`rootstep.prompts.render_steps`).
        verify: Omega as `(Task, answer) -> Verdict` (the flows pass the session's verifier): with the task
            (`task_context.task`, or the run's own), a fix that only re-states the step's answer verifies
            nothing, and an analyzer's "no agent error" is checked against the step it names.
        prior: agent step indices, most suspicious first (`rootstep.tracers.rank_steps`). When given, the
            analyzer is first asked about the top `max_candidates` of them in this order (step-specific
            prompt; it may judge a step correct); only if none of their fixes succeeds does it propose steps
            itself. The earlier-steps scan that follows is unchanged, so the label is still the earliest.
        controls: control replays per flip (the step unchanged, the rest live): a success is causal only
            when the controls fail (`check_flip`); otherwise the attempt is `not_causal`.
        repeats: replays of the fix (and `controls` controls each) per flip: the flip counts and the
            interval on their difference give the label's `confidence` (`rootstep.annotation._confidence`).
        deterministic: `step -> why` its control would reproduce the recorded run (`proven_identical`):
            such controls are recorded as proven identical instead of replayed.
        step_request: `step -> the messages of the request that produced it` (the recording): a fix the
            analyzer only described is first sought by having the analyzer's model take that step again in
            the agent's seat (`retake_step`), then by rewriting the message (`rewrite_step`).
        run_program: `code -> what it printed` (`rootstep.benchmarks.sandbox_runner`; the flows pass one
            over the session's verification sandbox): for math and QA, what a step's or a fix's fenced Python
            prints is what it states (`answer_leak`, `gives_answer`). None: only the text is read.
        early_controls: in the ranked phase, replay the step's control beside the fix's replay (another
            thread; the replay callable must allow two replays at once), so that a flip's proof is ready when
            the fix flips; a control that a failed fix leaves unused is kept for a later flip at that step and
            recorded with the search's replays. The scan of earlier steps, where most fixes fail, does not.
        step_tools: `step -> the tools its recorded request offered` (the recording): at such a step a fix that
            is only calls of those tools written as text is replayed as those calls (`written_calls`).

    Returns a `CounterfactualResult` whose annotation is verified with the earliest causal step found
    (every earlier agent step tested or judged correct), `unproven_earliest` when earlier steps were
    left untested (the budget ran out), `not_causal` when the only flips were matched by their controls,
    `verifier_suspect` when no agent erred, or `unresolved` with every attempt in its evidence. When fixes
    at several earlier erring steps each failed, their joint fix is tried (`multi_step` label). Replays
    that diverge or raise decide nothing (they are kept as rows with `divergence` / `error`). Fixes that
    hand over the reference answer at a step that gave none are rejected and re-asked (`answer_leak`).
    """
    if analyzer is None or replay is None:
        raise TypeError("find_decisive_step needs an analyzer and a replay callable")
    search = _Search(trajectory, verdict, task_context or TaskContext.of(trajectory), analyzer, replay,
                     budget or Budget(), max_prompt_chars, verify, controls, repeats, deterministic, step_request,
                     run_program, early_controls, step_tools)
    search.grounded()
    if prior is not None and search.best is None:
        search.by_prior(prior)
    if search.best is None:
        search.ranked()
    search.scan(require_fix=False, source="earlier")
    search.joint()
    return search.result("rootstep")


def sequential_scan(trajectory: Trajectory, *, analyzer: ChatLike, replay: ReplayFn, budget: Budget | None = None,
                    verify: Verify | None = None, max_prompt_chars: int = 24_000) -> CounterfactualResult:
    """The naive baseline: from step 0, ask for a fix of every agent step and re-simulate each, stopping
    at the first success (which is then the earliest). No analyzer ranking; the analyzer may not
    declare a step correct. Paired with a replay callable that re-runs everything live (no prefix
    replay), it is the "sequential scan that re-simulates every step live" of the benchmark. The arguments
    are `find_decisive_step`'s (the run's own verdict and task context); the default budget is a replay and
    four calls per step, whatever steps are left open.
    """
    budget = budget or Budget(max_replays=len(trajectory.steps), max_llm_calls=4 * len(trajectory.steps))
    search = _Search(trajectory, None, TaskContext.of(trajectory), analyzer, replay,
                     budget.model_copy(update={"max_open_steps": None}), max_prompt_chars, verify)
    search.scan(require_fix=True, source="sequential")
    return search.result("sequential")
