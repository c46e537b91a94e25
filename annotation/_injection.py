"""Fault injection on a successful run (AgenTracer, Algorithm 1 lines 8-17): failures labelled by construction.

A corrupted agent step is forced (`Intervention(kind="corruption")`) and the run re-simulated; if Omega
now says failure (and the failed verdict is not suspect: a corruption that only made the answer
unreadable proves nothing), the corrupted run is labelled `(agent(t), t)` by construction (verified).

A team with a checker (an executor that prints results, a critic, visible tests) self-corrects a one-step
corruption that the checks expose, so a blind corruption rarely flips it. The modes:

* `one_shot`: the perturber picks any step and a corruption (`perturber.j2`), nothing else;
* `team_aware`: the perturber is asked, step by step at injection points spread over the run's agent
  steps and agents (`injection_points`), for a mistake that passes what the team sees and checks and
  fails Omega (`perturber_at_step.j2`: the later steps that see it, the task's visible tests, what Omega
  checks): an edge case the visible examples miss, a wrong constant in a branch they do not reach, a
  misread requirement the critic shares;
* `persistent`: as `team_aware`, but the corruption's standing instruction is also appended to that
  agent's system prompt for the rest of the replay (`Intervention.persist`, as in AgenTracer's released
  code): the agent keeps erring. The label is the first corrupted step; the evidence says the mode;
* `auto` (default): `team_aware` at each point, and the same corruption `persistent` when the team
  corrected it and the corrupted agent spoke again in that replay (otherwise the instruction would reach
  no call and the persistent replay would only re-roll the same requests).

Then, while replays remain, the programmatic perturbations (no LLM; they change the work, never the
team's own checks). Points whose step cannot flip the run are skipped: a candidate of an ensemble whose
answer a majority of the other, independent candidates repeat (`independent_agents`).
"""

from __future__ import annotations

import math
import random
from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field
from rootstep.benchmarks import RunProgram, Verify, code_key, final_answer_span, is_suspect, planted_answer
from rootstep.model import (
    Annotation,
    Evidence,
    Intervention,
    Replay,
    SearchStats,
    Step,
    Task,
    Trajectory,
    Usage,
    Verdict,
)
from rootstep.prompts import render, render_steps

from ._budget import Budget, Meter
from ._perturbations import programmatic_perturbations
from ._propose import (
    Asked,
    ChatLike,
    Corruption,
    TaskContext,
    answer_leaks,
    answer_step,
    ask_valid,
    model_name,
    validate_corruption,
    validate_corruption_at,
    with_transcript,
    work_key,
)
from ._trial import Deterministic, ReplayFn, Replayed, check_flip, edit_size, try_intervention, unfounded_description

InjectionMode = Literal["auto", "team_aware", "persistent", "one_shot"]
ReplayMode = Literal["one_step", "persistent"]


class InjectionAttempt(Replayed):
    """A corruption that was replayed: its turn is a failure (`turned`), a flip one the controls confirm."""

    corruption: Corruption
    mode: ReplayMode = "one_step"
    suspect: str | None = None
    """The corrupted run failed, but its verdict is suspect (the verifier may have misread it): no flip."""

    @property
    def turned(self) -> bool:
        """The corrupted replay failed with a verdict that is not suspect (before the controls)."""
        return self.replay.success_after is False and self.suspect is None


class InjectionResult(BaseModel):
    """The labelled failure (when a corruption flipped the run) and every attempt behind it.

    `annotation` labels `failed_run` (the corrupted re-simulation, a new run whose `parent_run_id` is
    the success), not the success itself. It is None when nothing flipped: a success that resisted
    every corruption is not an unresolved failure; the attempts and `cost` still record the work.
    """

    annotation: Annotation | None = None
    failed_run: Trajectory | None = None
    replays: list[Replay] = Field(default_factory=list)
    attempts: list[InjectionAttempt] = Field(default_factory=list)
    asked: list[Asked] = Field(default_factory=list)
    points: list[int] = Field(default_factory=list)
    """The injection points tried in order (team-aware modes)."""
    notes: list[str] = Field(default_factory=list)
    cost: Usage = Field(default_factory=Usage)
    stats: SearchStats = Field(default_factory=SearchStats)
    """What the injection did and which limit cut it (`Meter.stats`)."""
    mode: str | None = None
    """How the corruption that flipped the run was applied: `programmatic`, `one_step`, `persistent` or
    `one_shot` (None when nothing flipped)."""

    @property
    def flipped(self) -> bool:
        return self.annotation is not None


# ------------------------------------------------------------------------------------ validation


# ------------------------------------------------------------------------------------ injection points


def _answer_key(step: Step) -> str | None:
    """What a candidate answers: its program (layout-free) when it holds code, else its final answer span."""
    if "```" in step.content:
        program = code_key(step.content, None)
        if program is not None:
            return program
    span, _ = final_answer_span(step.content)
    return None if span is None else " ".join(span.split()).lower()


def cannot_flip(trajectory: Trajectory, step: Step, independent_agents: Sequence[str]) -> str | None:
    """Why corrupting `step` cannot flip the run, or None.

    A step of an agent in `independent_agents` (an ensemble's candidates, sampled independently and
    voted on) whose answer at least half of that agent's other candidates repeat: the vote keeps the
    majority's answer whatever this candidate says."""
    if step.agent not in independent_agents:
        return None
    mine = _answer_key(step)
    others = [s for s in trajectory.steps if s.agent == step.agent and s.kind == "agent" and s.index != step.index]
    if mine is None or not others:
        return None
    same = sum(1 for s in others if _answer_key(s) == mine)
    if same >= math.ceil((len(others) + 1) / 2):
        return (f"{same} of the {len(others)} other independent {step.agent} candidates give the same answer "
                f"({mine!r}): the ensemble keeps it whatever this one says")
    return None


def injection_points(trajectory: Trajectory, k: int, seed: int = 0, independent_agents: Sequence[str] = (),
                     answer_agents: Sequence[str] = ()) -> list[int]:
    """Up to `k` agent steps to corrupt, spread over the run's positions and agents, the answer step last.

    The agents are visited round-robin in a seeded order, each agent's steps in a seeded order, so the
    first points cover different agents and positions; the step that gives the final answer
    (`answer_step`: the last step of one of `answer_agents`, when the framework names them) is always
    among the points (last, since a corruption there cannot be corrected,
    and a corpus of last-step labels teaches a tracer to blame the last step). Steps after the answer
    step (AG2's critic saying TERMINATE after the coder's final answer) are left out: the answer is
    given, a corruption there has to invent a new one. So are steps that cannot flip the run
    (`cannot_flip`). The same run and seed always give the same points.
    """
    if k < 1:
        return []
    rng = random.Random(f"{seed}:{trajectory.id}")
    final = answer_step(trajectory, answer_agents)
    last = final.index if final is not None else len(trajectory.steps)
    usable = [s for s in trajectory.steps if s.kind == "agent" and s.index <= last
              and cannot_flip(trajectory, s, independent_agents) is None]
    by_agent: dict[str, list[Step]] = {}
    for s in usable:
        if final is None or s.index != final.index:
            by_agent.setdefault(s.agent, []).append(s)
    agents = sorted(by_agent)
    rng.shuffle(agents)
    for steps in by_agent.values():
        rng.shuffle(steps)
    spread: list[int] = []
    while any(by_agent.values()):
        for agent in agents:
            if by_agent[agent]:
                spread.append(by_agent[agent].pop().index)
    chosen = spread[: k - 1] if final is not None and any(s.index == final.index for s in usable) else spread[:k]
    if final is not None and any(s.index == final.index for s in usable):
        chosen.append(final.index)
    return chosen


def _team_view(trajectory: Trajectory, step: Step, task: Task | None, verdict: Verdict | None) -> dict[str, Any]:
    """What the prompt says the rest of the team sees and checks after `step`, and what Omega checks.
    `tests_are_visible`: Omega's tests are the visible examples themselves (plain MBPP: 3 asserts in the
    prompt), so a corruption must fail one of them and survives only where no later step runs them (the
    prompt said "its code must still pass these", and a careful perturber declined every MBPP step)."""
    later = trajectory.steps[step.index + 1 :]
    watchers = list(dict.fromkeys(f"{s.agent} ({'tool output' if s.kind in ('tool', 'environment') else s.kind + ' step'})"
                                  for s in later if s.agent != step.agent or s.kind != "agent"))
    visible: list[str] = []
    if task is not None and task.kind == "coding":
        from rootstep.benchmarks import visible_tests

        visible = visible_tests(task)
    details = (verdict.details if verdict is not None else {}) or {}
    tests_are_visible = False
    if task is not None and task.kind == "coding":
        total = details.get("total")
        tests_are_visible = total is not None and bool(total) and bool(visible) and int(total) <= len(visible)
        omega = (f"the benchmark's tests run on the final code, and they are exactly the {total} visible examples "
                 "below" if tests_are_visible else
                 f"the benchmark's own tests ({total} of them) run on the final code; they cover edge cases and "
                 "inputs the visible examples do not show" if total else
                 "the benchmark's own tests run on the final code; they cover more than the visible examples")
    else:
        omega = "the final answer is compared with the reference answer"
    return {"watchers": watchers, "visible_tests": visible, "omega": omega, "tests_are_visible": tests_are_visible}


# ------------------------------------------------------------------------------------ the search


class _Injection:
    def __init__(self, trajectory: Trajectory, perturber: ChatLike | None, replay: ReplayFn, budget: Budget,
                 context: TaskContext, max_prompt_chars: int, verify: Verify | None = None, controls: int = 1,
                 repeats: int = 1, deterministic: Deterministic | None = None,
                 run_program: RunProgram | None = None):
        self.trajectory = trajectory
        self.perturber = perturber
        self.run_program = run_program
        self.replay = replay
        self.budget = budget.for_run(sum(1 for s in trajectory.steps if s.kind == "agent"))
        self.meter = Meter(self.budget)
        self.verify, self.controls, self.repeats, self.deterministic = verify, controls, repeats, deterministic
        self.context = context
        self.attempts: list[InjectionAttempt] = []
        self.asked: list[Asked] = []
        self.notes: list[str] = []
        self.points: list[int] = []
        self.acts_later = False
        self.flipped: tuple[InjectionAttempt, Trajectory] | None = None
        self.base: dict[str, Any] = {"question": context.question or trajectory.question,
                     "ground_truth": context.ground_truth if context.ground_truth is not None else trajectory.ground_truth,
                     "steps": render_steps(trajectory, max_prompt_chars=max_prompt_chars, compact=True)[0],
                     "agents": trajectory.agents}

    def tried(self) -> set[tuple[int, str]]:
        return {(a.corruption.step, work_key(a.corruption.content)) for a in self.attempts}

    def planted(self, step: Step, content: str) -> str | None:
        """`planted_answer` over the task (None without a task and verifier)."""
        task = self.context.task
        final = answer_step(self.trajectory)
        if task is None or self.verify is None or (final is not None and final.index == step.index):
            return None  # the step that gives the run's answer may carry a wrong one
        return planted_answer(task, step.content, content, self.verify, self.run_program)

    def judged(self, row: Replay, verdict: Verdict | None) -> bool | None:
        """A replay's outcome as a flip of the success: a failure whose verdict is not suspect."""
        return None if row.success_after is None else (row.success_after is False and is_suspect(verdict) is None)

    def attempt(self, c: Corruption, mode: ReplayMode = "one_step") -> bool:
        persist = c.instruction if mode == "persistent" else None
        intervention = Intervention(run_id=self.trajectory.id, step=c.step, new_content=c.content, kind="corruption",
                                    agent=c.agent, tool_calls=c.tool_calls, persist=persist)
        row, result, verdict = try_intervention(self.trajectory, intervention, self.replay, self.meter, "fault_injection")
        original = self.trajectory.steps[c.step].content
        a = InjectionAttempt(corruption=c, replay=row, mode=mode,
                             suspect=is_suspect(verdict) if row.success_after is False else None,
                             edit=edit_size(original, c.content, self.context.task, self.run_program))
        if a.turned:
            a.check = check_flip(self.trajectory, intervention, self.judged, self.replay, self.meter, "fault_injection",
                                 controls=self.controls, repeats=self.repeats,
                                 deterministic=None if self.deterministic is None else self.deterministic(c.step))
        self.attempts.append(a)
        # whether the corrupted agent spoke again after its step: only then can a persistent instruction
        # (which reaches its later live calls) make a replay differ from this one
        self.acts_later = result is not None and any(
            s.kind == "agent" and s.agent == c.agent for s in result.steps[c.step + 1:])
        if a.confirmed and result is not None:
            self.flipped = (a, result)
            return True
        return False

    def one_shot(self) -> None:
        """Free-choice perturber proposals (`perturber.j2`), the ineffective ones fed back."""
        assert self.perturber is not None
        for _ in range(self.budget.max_candidates):
            stop = self.meter.cannot_replay("the perturber's proposals")
            if stop:
                self.notes.append(f"perturber proposals stopped: {stop}")
                return
            tried_list = [{"step": a.corruption.step, "description": a.corruption.description} for a in self.attempts]
            tried = self.tried()
            corruption, why = ask_valid(
                self.perturber,
                lambda prev, problem: render("perturber.j2", **self.base, tried=tried_list, previous_answer=prev,
                                             problem=problem),
                lambda answer: validate_corruption(self.trajectory, answer, tried, self.planted),
                self.meter, self.asked, "perturber.j2",
            )
            if corruption is None:
                self.notes.append(f"perturber proposals stopped: {why}")
                return
            if self.attempt(corruption):
                return

    def team_aware(self, mode: InjectionMode, seed: int, independent_agents: Sequence[str],
                   answer_agents: Sequence[str]) -> None:
        """At each injection point, a mistake the team's checks miss; replayed one-step and/or persistent."""
        assert self.perturber is not None
        t = self.trajectory
        self.points = injection_points(t, self.budget.max_candidates, seed, independent_agents, answer_agents)
        for s in t.steps:
            why = cannot_flip(t, s, independent_agents) if s.kind == "agent" else None
            if why:
                self.notes.append(f"step {s.index} ({s.agent}) skipped: {why}")
        view_task = self.context.task
        for index in self.points:
            step = t.steps[index]
            stop = self.meter.cannot_replay(f"the team-aware points before step {index}")
            if stop:
                self.notes.append(f"team-aware points stopped before step {index}: {stop}")
                return
            tried = self.tried()
            shown = next(x for x in self.base["steps"] if x["index"] == index)
            shown = {**shown, "content": shown["full"]}  # the step to corrupt, whole (the run shows it compact)
            team = _team_view(t, step, view_task, t.verdict)

            def validate(answer: str) -> tuple[Corruption | Literal[False] | None, str | None]:
                return validate_corruption_at(step, answer, tried, need_instruction=mode != "team_aware",
                                              planted=self.planted)

            found: tuple[Corruption | Literal[False] | None, str | None] = ask_valid(
                self.perturber,
                lambda prev, problem: render("perturber_at_step.j2", **self.base, step=shown, team=team,
                                             persistent=mode != "team_aware", previous_answer=prev, problem=problem),
                validate,
                self.meter, self.asked, "perturber_at_step.j2",
            )
            corruption, why = found
            if corruption is False:
                self.notes.append(f"step {index} ({step.agent}): the perturber found no mistake the team would miss")
                continue
            if corruption is None:
                self.notes.append(f"step {index} ({step.agent}): no corruption tried ({why})")
                continue
            if mode in ("auto", "team_aware") and self.attempt(corruption, "one_step"):
                return
            if mode == "auto" and self.attempts[-1].replay.success_after is not None and not self.acts_later:
                self.notes.append(f"step {index} ({step.agent}): no persistent replay: {step.agent} made no call after "
                                  "the corrupted step, so its standing instruction would reach nothing (the same "
                                  "replay again would be a re-roll, not a new test)")
                continue
            if mode in ("auto", "persistent") and not self.meter.cannot_replay(f"the persistent replay of step {index}"):
                if self.attempt(corruption, "persistent"):
                    return

    def programmatic(self, seed: int, independent_agents: Sequence[str]) -> None:
        t = self.trajectory
        candidates = [p for p in programmatic_perturbations(t, seed)
                      if cannot_flip(t, t.steps[p.step], independent_agents) is None]
        if not candidates:
            self.notes.append("no programmatic perturbation applies to this run's agent steps")
        for p in candidates:
            stop = self.meter.cannot_replay("the programmatic candidates")
            if stop:
                self.notes.append(f"programmatic candidates stopped: {stop}")
                return
            if self.attempt(Corruption.of(p)):
                return

    def result(self, mode: InjectionMode) -> InjectionResult:
        t = self.trajectory
        replays = [r for a in self.attempts for r in a.rows()]
        cost = self.meter.cost()
        leaks = len(answer_leaks(self.asked))
        stats = self.meter.stats()
        if self.meter.cut is not None:
            self.notes.append(f"cut: {self.meter.cut.reason} (it stopped {self.meter.cut.stopped})")
        common: dict[str, Any] = dict(replays=replays, attempts=self.attempts, asked=self.asked, points=self.points, cost=cost,
                      stats=stats)
        if self.flipped is None:
            self.notes.append(f"no corruption flipped the run ({len(self.attempts)} tried)")
            return InjectionResult(notes=self.notes, **common)
        proof, failed_run = self.flipped
        c = proof.corruption
        annotator = model_name(self.perturber, "perturber") if c.source == "perturber" else f"programmatic:{c.name}"
        applied = "programmatic" if c.source == "programmatic" else proof.mode if mode != "one_shot" else "one_shot"
        notes = [
            f"step {a.corruption.step} ({a.corruption.source}{':' + a.corruption.name if a.corruption.name else ''}, "
            f"{a.mode}): "
            + ("flipped the run to failure" if a.confirmed else
               f"failed, not causal: {a.not_causal}" if a.not_causal else
               f"failed, but the verdict is suspect ({a.suspect}): not a flip" if a.suspect else
               "diverged" if a.replay.divergence else "replay error" if a.replay.error else "run still succeeded")
            + f" [{a.replay.id}]"
            for a in self.attempts
        ] + self.notes
        assert proof.check is not None
        if proof.mode == "persistent":
            notes.insert(0, f"persistent injection: step {c.step} was corrupted and the instruction {c.instruction!r} "
                            f"was appended to {c.agent}'s system prompt for the rest of the run; the label is the first "
                            "corrupted step")
        original = t.steps[c.step].content
        unfounded = unfounded_description(c.description, original, c.content) if c.source == "perturber" else None
        reason = c.description
        if unfounded is not None:
            # the perturber's account is its claim; what the edit did is read from the two texts
            reason = (f"{(proof.edit.summary if proof.edit else '') or 'the step was rewritten'} (the perturber described it as "
                      f"{c.description!r}: {unfounded})")
            notes.append(f"the perturber's description is not an account of its edit ({unfounded}): the label's "
                         "reason is the edit itself")
        annotation = Annotation(
            run_id=failed_run.id,
            framework=failed_run.framework,
            benchmark=failed_run.benchmark,
            method="fault_injection",
            agent=c.agent,
            step=c.step,
            verified=True,
            annotator=annotator,
            evidence=Evidence(reason=reason, corruption=c.content, replay_ids=[r.id for r in replays], notes=notes),
            cost=cost,
            steps=[c.step], confidence=proof.check.effect.confidence, flip_check=proof.check.summary(),
            proof_replay_id=proof.replay.id, edit=proof.edit, earliest="by construction", answer_leaks=leaks,
            search_stats=stats,
            metadata={"source_run_id": t.id, "corruption_source": c.source,
                      "perturbation": c.name, "tool_calls_changed": c.tool_calls is not None, "mode": applied,
                      "persist": c.instruction if proof.mode == "persistent" else None, "unnoticed": c.unnoticed,
                      "position": round(c.step / max(len(t.steps) - 1, 1), 3), "points": self.points,
                      "control_replays": self.meter.control_replays,
                      "description": c.description, "description_unfounded": unfounded},
        )
        annotation = with_transcript(annotation, self.asked, self.perturber)
        return InjectionResult(annotation=annotation, failed_run=failed_run, notes=self.notes, mode=applied, **common)


def inject_fault(
    trajectory: Trajectory,
    perturber: ChatLike | None = None,
    replay: ReplayFn | None = None,
    budget: Budget | None = None,
    programmatic: bool = True,
    *,
    seed: int = 0,
    task_context: TaskContext | None = None,
    max_prompt_chars: int = 24_000,
    mode: InjectionMode = "auto",
    independent_agents: Sequence[str] = (),
    answer_agents: Sequence[str] = (),
    verify: Verify | None = None,
    controls: int = 1,
    repeats: int = 1,
    deterministic: Deterministic | None = None,
    run_program: RunProgram | None = None,
) -> InjectionResult:
    """Corrupt one agent step of the successful `trajectory` so that its re-simulation fails.

    Args:
        trajectory: a successful run.
        perturber: the perturber LLM; None uses programmatic perturbations only.
        replay: re-simulates the run with an intervention: `(Trajectory, Verdict, ReplayOutcome)`.
        budget: `max_candidates` perturber proposals (one-shot) or injection points (the other modes),
            then programmatic ones while replays remain.
        programmatic: also try the programmatic perturbations (after the perturber's).
        seed: fixes the injection points and the order of programmatic candidates.
        mode: `auto`, `team_aware`, `persistent` or `one_shot` (see the module docstring).
        independent_agents: agents whose steps are independent candidates of an ensemble (AFlow's
            `custom` / `answer_generate`): a candidate the majority repeats is not corrupted.
        answer_agents: the agents whose last step gives the final answer (`Adapter.answer_agents`);
            the injection points end there.
        verify: Omega as `(Task, answer) -> Verdict`: with the task, a corruption that writes a final answer
            into a step that gave none is rejected and re-asked (`planted_answer`, counted as `answer_leaks`).
        controls, repeats, deterministic: as in `find_decisive_step`: a failure is a flip only when the
            controls (the step unchanged) still succeed; otherwise the attempt is not causal.
        run_program: `code -> what it printed` (as in `find_decisive_step`): for math and QA, a corruption
            whose program prints a wrong answer into a step that gave none plants it (`planted_answer`).

    A replay that diverges or raises decides nothing and the next candidate is tried; so does one whose
    failed verdict is suspect.
    """
    if replay is None:
        raise TypeError("inject_fault needs a replay callable")
    if trajectory.success is False:
        raise ValueError(f"run {trajectory.id} failed; fault injection needs a success (use counterfactual search)")
    if perturber is None and not programmatic:
        raise ValueError("no perturber and programmatic=False: there is nothing to inject")
    search = _Injection(trajectory, perturber, replay, budget or Budget(), task_context or TaskContext.of(trajectory),
                        max_prompt_chars, verify, controls, repeats, deterministic, run_program)
    if perturber is not None:
        if mode == "one_shot":
            search.one_shot()
        else:
            search.team_aware(mode, seed, independent_agents, answer_agents)
    if search.flipped is None and programmatic:
        search.programmatic(seed, independent_agents)
    return search.result(mode)
