"""Counterfactual search on a failed run (AgenTracer, Algorithm 1 lines 1-8): find the decisive step.

The decisive step is the EARLIEST agent step whose correction turns the failure into a success. The
analyzer LLM proposes `(step, agent, reason, fix)`; the proposal is validated (the step exists, is an
agent step, the agent is the one who took it, the fix changes it) and re-asked with the problem stated;
the fix is forced as an `Intervention(kind="fix")` and the run re-simulated; Omega decides.

Search order (`find_decisive_step`):
1. *ranked*: the analyzer's own diagnosis, then new diagnoses with the failed ones fed back, up to
   `Budget.max_candidates`, until one succeeds at step t;
2. *earlier*: every untried agent step before t in ascending order (all untried steps when nothing
   succeeded), each with the step-specific prompt; the analyzer may declare a step correct (no
   replay). The first success there is the earliest, since every step before it has been examined.
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
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rootstep.benchmarks import (
    RunProgram,
    Verify,
    answer_leak,
    answer_spans,
    code_blocks,
    defines,
    extract_code,
    is_suspect,
    printed_output,
    program_output,
    right_answer_in,
    same_answer,
    verify_quietly,
)
from rootstep.prompts import render, render_steps
from rootstep.model import (
    Annotation,
    Edit,
    Evidence,
    Intervention,
    Replay,
    SearchStats,
    Step,
    Task,
    Trajectory,
    Verdict,
    match_agent,
)

from ._attempt import (
    answer_leaks,
    Asked,
    ChatLike,
    Deterministic,
    FlipCheck,
    ReplayFn,
    answer_step,
    as_index,
    ask_valid,
    check_flip,
    control_of,
    described_change,
    edit_size,
    environment_limits,
    json_object,
    model_name,
    not_the_step_itself,
    replay_said,
    retake_step,
    rewrite_step,
    same_text,
    same_work,
    work_key,
    try_intervention,
    verdict_feedback,
    with_transcript,
)
from ._budget import Budget, Meter

SearchName = Literal["rootstep", "sequential"]
StepRequest = Callable[[Step], "list[dict[str, Any]] | None"]
"""`step -> the message list of the recorded request that produced it`, or None (no recording, or tools)."""


class TaskContext(BaseModel):
    """What the analyzer is told besides the run: the task, its ground truth, environment feedback."""

    model_config = ConfigDict(extra="forbid")

    question: str = ""
    ground_truth: str | None = None
    feedback: str | None = None
    """Environment feedback beyond Omega's verdict (test output, tool errors); appended to it."""
    task: Task | None = None
    """The benchmark task (its verifier compares a fix's answer with the step's); a collected run's own
    `recording.task` by default."""

    @classmethod
    def of(cls, trajectory: Trajectory) -> "TaskContext":
        return cls(question=trajectory.question, ground_truth=trajectory.ground_truth,
                   task=None if trajectory.recording is None else trajectory.recording.task)


class Diagnosis(BaseModel):
    """One analyzer proposal that passed validation."""

    model_config = ConfigDict(extra="forbid")

    step: int
    agent: str
    reason: str = ""
    fix: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    declined: bool = False
    """Step-specific prompt only: the analyzer judged the step correct (nothing to replay)."""
    instruction: str | None = None
    """The analyzer's description of the change when it described the fix instead of writing it; `fix` is
    then the step written for it (`written`)."""
    written: Literal["retake", "rewrite"] | None = None
    """How a described fix was written: the step taken again by the analyzer's model in the agent's seat
    (`retake_step`), or the analyzer's description made in the step's message (`rewrite_step`)."""
    source: Literal["ranked", "earlier", "sequential", "prior", "joint"] = "ranked"


class NoAgentError(BaseModel):
    """The analyzer's finding that no agent erred: the run's answer is right and the check is wrong."""

    model_config = ConfigDict(extra="forbid")

    reason: str = ""
    answer_step: int | None = None
    """The step that gives the right answer (None: the final answer)."""
    confirmed: str | None = None
    """Where the task's verifier itself accepts that step's answer (`right_answer_in`), or None."""


class Attempt(BaseModel):
    """A diagnosis that was replayed, and what Omega said."""

    diagnosis: Diagnosis
    replay: Replay
    presentation_only: str | None = None
    """Why the fix only re-formatted the step's own answer (`same_answer`): such a success verifies nothing."""
    joint: list[Diagnosis] = Field(default_factory=list)
    """A joint fix: the further, later steps fixed in the same replay (`diagnosis` is the earliest)."""
    check: FlipCheck | None = None
    """Repeats and controls of a success (`check_flip`): the flip is causal only when the controls fail."""
    edit: Edit | None = None
    """The fix's size (`edit_size`) and whether it states an answer the step did not (`adds_answer`)."""
    repeated: bool = False
    """The fixed replay failed with the run's original final answer: later agents carried the error on."""
    said: str | None = None
    """What a replay that still failed ended with (`replay_said`): shown to the analyzer beside the fix."""
    beside: list[Replay] = Field(default_factory=list)
    """Control replays of the step run at the same time as this fix's replay (`early_controls`); a later flip
    at the step may use them."""

    @property
    def flipped(self) -> bool:
        """The replay succeeded with a fix that changed the agent's work (before the controls)."""
        return self.replay.success_after is True and self.presentation_only is None

    @property
    def success(self) -> bool:
        """A flip that the controls confirm (a label candidate)."""
        return self.flipped and (self.check is None or self.check.causal)

    @property
    def not_causal(self) -> str | None:
        return self.check.why_not if self.flipped and self.check is not None else None

    @property
    def steps(self) -> list[int]:
        return [self.diagnosis.step, *(d.step for d in self.joint)]

    def rows(self) -> list[Replay]:
        """This attempt's replays: the fix, a control run beside it, its repeats, the controls (a control run
        beside an earlier fix of the step and used here appears there too: `result` keeps the first)."""
        return [self.replay, *self.beside] + ([] if self.check is None else self.check.repeats + self.check.controls)


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


def _check_step(trajectory: Trajectory, raw_step: Any, raw_agent: Any, expect: int | None) -> tuple[Step | None, str | None]:
    n = len(trajectory.steps)
    index = as_index(raw_step)
    if index is None:
        return None, f"mistake_step must be an integer step number, got {raw_step!r}"
    if expect is not None and index != expect:
        return None, f"you were asked about step {expect}, not step {index}; mistake_step must be {expect}"
    if not 0 <= index < n:
        return None, f"step {index} does not exist: the run has steps 0..{n - 1}"
    step = trajectory.steps[index]
    if step.kind != "agent":
        agent_steps = [s.index for s in trajectory.steps if s.kind == "agent"]
        return None, (
            f"step {index} is a {step.kind} step (by {step.agent}), not an agent step; only agent steps can be "
            f"corrected (agent steps: {agent_steps})"
        )
    if not isinstance(raw_agent, str) or not raw_agent.strip():
        return None, f"mistake_agent is missing; step {index} was taken by {step.agent}"
    if match_agent(raw_agent, [step.agent]) is None:
        return None, f"step {index} was taken by {step.agent}, not by {raw_agent!r}"
    return step, None


def _fix_text(fix: Any) -> Any:
    """`suggested_fix` as text when the model wrapped the text in an object of one field: `{"code": "..."}` (the
    1.5B's fix of AG2 critic and coder steps, main job of 2026-11-28, GSM8K test-474, refused twice as empty) is
    that code in a Python block; `{"text" | "content" | "message": "..."}` is the text. Anything else is left as
    it is (and refused as not text)."""
    if isinstance(fix, dict) and len(fix) == 1:
        (key, value), = fix.items()
        if isinstance(value, str) and value.strip():
            if key == "code":
                return value if code_blocks(value) else f"```python\n{value.strip()}\n```"
            if key in ("text", "content", "message"):
                return value
    return fix


def validate_diagnosis(
    trajectory: Trajectory,
    answer: str,
    *,
    expect_step: int | None = None,
    may_decline: bool = False,
    tested: set[tuple[int, str]] | None = None,
    fix_problem: Callable[[Step, str], str | None] | None = None,
    rewrite: bool = False,
) -> tuple[Diagnosis | NoAgentError | None, str | None]:
    """Parse and check an analyzer answer; `(Diagnosis, None)` or `(None, the problem to state)`.

    Checks, in order: a JSON object; `no_agent_error: true` (the whole-run diagnosis only, with the
    `answer_step` that gives the right answer, or null for the final answer) is a `NoAgentError`;
    (with `may_decline`) `fix_needed: false` is a valid decline;
    the step is an integer, is `expect_step` when given, exists and is an agent step; the agent is the
    one who took it (case and punctuation ignored); the fix is non-empty, differs from the step as
    recorded (an unchanged step would replay the same failure) and was not tested already; with
    `fix_problem` (the search's checks against the task: `_Search.fix_problem`), whatever problem it names
    (an `answer_leak:`, a `wrong_answer:`). With `rewrite`, a fix that describes the change
    (`described_change`) is not a problem: the diagnosis comes back with it as `instruction` and no `fix`,
    for the caller to have the step rewritten (`rewrite_step`) and checked (`check_fix`).
    """
    data, problem = json_object(answer)
    if data is None:
        return None, problem
    if data.get("no_agent_error") is True:
        if expect_step is not None:
            return None, "no_agent_error is only allowed in the diagnosis of the whole run; here answer about this step"
        raw = data.get("answer_step")
        index = None if raw in (None, "final", "final answer") else as_index(raw)
        if raw not in (None, "final", "final answer") and (index is None or not 0 <= index < len(trajectory.steps)):
            return None, (f"answer_step must be the number of the step that gives the right answer (0.."
                          f"{len(trajectory.steps) - 1}) or null for the final answer, got {raw!r}")
        return NoAgentError(reason=str(data.get("reason") or ""), answer_step=index), None
    if may_decline and data.get("fix_needed") is False:
        if expect_step is None:
            return None, "fix_needed false is only allowed when asked about one step"
        step = trajectory.steps[expect_step]
        return Diagnosis(step=step.index, agent=step.agent, reason=str(data.get("reason") or ""), declined=True,
                         source="earlier"), None
    for key in ("mistake_step", "mistake_agent", "suggested_fix"):
        if key not in data:
            return None, f"the JSON object has no {key!r} key"
    step, problem = _check_step(trajectory, data["mistake_step"], data["mistake_agent"], expect_step)
    if step is None:
        return None, problem
    fix = _fix_text(data["suggested_fix"])
    tool_calls = data.get("suggested_tool_calls")
    if tool_calls is not None and not (isinstance(tool_calls, list)
                                       and all(isinstance(t, dict) and (t.get("name") or t.get("function"))
                                               for t in tool_calls)):
        return None, "suggested_tool_calls, when given, must be a list of {\"name\": ..., \"arguments\": {...}} objects"
    if not isinstance(fix, str) or (not fix.strip() and tool_calls is None):
        return None, "suggested_fix must be the non-empty corrected text of the step"
    reason = str(data.get("reason") or "")
    if rewrite and fix.strip() and tool_calls is None and described_change(fix, step.agent) is not None:
        return Diagnosis(step=step.index, agent=step.agent, reason=reason, instruction=fix), None
    problem = check_fix(step, fix, tool_calls, tested=tested, fix_problem=fix_problem)
    if problem is not None:
        return None, problem
    return Diagnosis(step=step.index, agent=step.agent, reason=reason, fix=fix, tool_calls=tool_calls), None


def check_fix(step: Step, fix: str, tool_calls: list[dict[str, Any]] | None = None, *,
              tested: set[tuple[int, str]] | None = None,
              fix_problem: Callable[[Step, str], str | None] | None = None) -> str | None:
    """Why `fix` cannot replace `step` (see `validate_diagnosis`), or None."""
    not_itself = not_the_step_itself(fix, step.agent, "suggested_fix") if fix.strip() else None
    if not_itself is not None:
        return not_itself
    if same_work(fix, step.content) and tool_calls is None:
        return (f"suggested_fix is what step {step.index} already says (the same code and text, comments and layout "
                "aside); a correction must change what the step does")
    if tested and (step.index, work_key(fix)) in tested and tool_calls is None:
        return f"this exact fix of step {step.index} was already tested and the run still failed"
    return fix_problem(step, fix) if fix_problem is not None and fix.strip() else None


class _Search:
    """State shared by the phases of one search."""

    def __init__(self, trajectory: Trajectory, verdict: Verdict | None, context: TaskContext, analyzer: ChatLike,
                 replay: ReplayFn, budget: Budget, max_prompt_chars: int, verify: Verify | None = None,
                 controls: int = 1, repeats: int = 1, deterministic: Deterministic | None = None,
                 step_request: StepRequest | None = None, run_program: RunProgram | None = None,
                 early_controls: bool = False):
        if not trajectory.steps:
            raise ValueError(f"run {trajectory.id} has no steps to correct")
        verdict = verdict if verdict is not None else trajectory.verdict
        if verdict is not None and verdict.success:
            raise ValueError(f"run {trajectory.id} succeeded; counterfactual search needs a failure (inject faults instead)")
        self.trajectory = trajectory
        self.verdict = verdict
        self.task = context.task
        self.verify = verify
        self.run_program = None if run_program is None else functools.lru_cache(maxsize=256)(run_program)
        """`run_program`, each program run once per search: a fix's program is read by the leak, wrong-answer,
        gives-answer and same-answer checks, each of which ran it in a sandbox."""
        self.verify_text = functools.lru_cache(maxsize=256)(
            lambda text: None if self.task is None or self.verify is None else verify_quietly(self.verify, self.task, text))
        """The task's verifier on a text, once per text per search (a coding task's runs its tests in a sandbox)."""
        self.no_agent_error: NoAgentError | None = None
        self.success_before = None if verdict is None else verdict.success
        self.analyzer = analyzer
        self.replay = replay
        self.meter = Meter(budget.for_run(sum(1 for s in trajectory.steps if s.kind == "agent")))
        self.controls, self.repeats, self.deterministic = controls, repeats, deterministic
        self.step_request = step_request
        feedback = verdict_feedback(verdict)
        if context.feedback:
            feedback += "\n" + context.feedback
        limits = environment_limits(trajectory)
        if limits:
            feedback += ("\nENVIRONMENT LIMITS (what the run's code could not use; the run failed on the environment "
                         "there, and a corrected step must do without it):\n" + "\n".join(f"- {x}" for x in limits))
        self.base = {
            "question": context.question or trajectory.question,
            "ground_truth": context.ground_truth if context.ground_truth is not None else trajectory.ground_truth,
            "feedback": feedback,
            "steps": render_steps(trajectory, max_prompt_chars=max_prompt_chars, compact=True)[0],
            "agents": trajectory.agents,
        }
        self.attempts: list[Attempt] = []
        self.declined: list[Diagnosis] = []
        self.asked: list[Asked] = []
        self.notes: list[str] = []
        self.best: Attempt | None = None
        self.fixed_run: Trajectory | None = None
        self.early_controls = early_controls
        self.controls_by_step: dict[int, list[tuple[Replay, Verdict | None]]] = {}
        """Control replays run for a step (beside a ranked fix's replay), not yet used by a flip check."""
        self.retakes: dict[int, tuple[str | None, str | None]] = {}
        """Each step's retake (`retake_step`), asked once per search: its request is the agent's recorded one,
        whatever the diagnosis, so a second retake of the step is the first one again (on the main job's GSM8K
        test-474 the 1.5B's retake looped to its 856-token room twice, 89 s and 139 s, the same answer)."""

    # -------------------------------------------------------------- prompts

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

    def leak(self, step: Step, fix: str) -> str | None:
        """`answer_leak` over the task (None without a task and verifier). The step that gave the run's final
        answer gave an answer, whatever its form (a coder's prose instead of code is a wrong answer); and a
        fix that carries forward a right answer the team itself reached before the step hands nothing over
        (`reached_before`)."""
        if self.task is None or self.verify is None:
            return None
        final = answer_step(self.trajectory)
        if final is not None and final.index == step.index:
            return None
        leaked = answer_leak(self.task, step.content, fix, self.verify, self.run_program)
        if leaked is not None and self.reached_before(step.index) is not None:
            return None
        return leaked

    def reached_before(self, index: int) -> str | None:
        """Where the team stated a right answer before step `index` (an agent step's marked answer, or what a
        tool step reports its program printed), or None. A team that had the answer and lost it later made its
        mistake after reaching it: a fix that restores the answer there is the team's own work carried on."""
        if self.task is None or self.verify is None:
            return None
        for s in self.trajectory.steps[:index]:
            if s.kind == "human":
                continue  # the task itself
            if s.kind == "agent":
                found = right_answer_in(self.task, s.content, self.verify)
            else:
                printed = printed_output(s.observation or s.content or "")
                found = right_answer_in(self.task, f"Program output:\n{printed}", self.verify,
                                        last_number=True) if printed else None
            if found is not None:
                return f"step {s.index} ({s.agent}): {found}"
        return None

    def tested(self) -> set[tuple[int, str]]:
        return {(a.diagnosis.step, work_key(a.diagnosis.fix)) for a in self.decided()}

    def tried_steps(self) -> set[int]:
        return {a.diagnosis.step for a in self.decided()} | {d.step for d in self.declined}

    def ask_ranked(self) -> tuple[Diagnosis | NoAgentError | None, str | None]:
        failed, tested = self.failed(), self.tested()
        diagnosis, why = ask_valid(
            self.analyzer,
            lambda prev, problem: render("analyzer.j2", **self.base, failed=failed, previous_answer=prev, problem=problem),
            lambda answer: validate_diagnosis(self.trajectory, answer, tested=tested, fix_problem=self.fix_problem, rewrite=True),
            self.meter, self.asked, "analyzer.j2",
        )
        if isinstance(diagnosis, Diagnosis):
            return self.written(diagnosis, tested)
        return diagnosis, why

    def fix_problem(self, step: Step, fix: str) -> str | None:
        """Why `fix` cannot be the correction of `step`: it hands over the reference answer (`leak`), or it
        states an answer the verifier rejects. The latter was a label: on AgentPrune MATH-500 255 (slice of
        2026-11-28) the retaken first step stated 7 where the step had stated the right 4, and the replay
        flipped anyway (the decision agent answered 4 in it): a correction does not state a wrong answer."""
        leaked = self.leak(step, fix)
        if leaked is not None:
            return f"answer_leak: {leaked}"
        wrong = self.wrong_answer(fix)
        if wrong is not None:
            return (f"wrong_answer: the fix states the answer {wrong!r}, which the task's verifier rejects: a corrected "
                    "step does not state a wrong answer")
        failing = self.failing_code(fix)
        if failing is not None:
            return (f"wrong_code: the fix's code fails the task's tests ({failing}): a corrected step's code "
                    "passes them")
        return None

    def wrong_answer(self, text: str) -> str | None:
        """The answer `text` states where the prompts ask for one (a box, an `Answer:` line, an answer phrase), or
        what its program prints when it has one and a runner is given (the program, not the prose around it:
        MetaGPT MATH-500 255's retake printed the right 4 beside a prose `Answer: 7`), when the task's verifier
        rejects it; None for no such answer, a coding task, or no verifier. A step that
        states one is not correct whatever the analyzer says: on AgentPrune MATH-500 634 (slice of 2026-11-28)
        every agent wrote `Answer: 997` (the answer is 333), the 1.5B judged all nine steps correct, and nothing
        was replayed."""
        if self.task is None or self.verify is None or self.task.kind == "coding":
            return None
        printed = program_output(text, self.run_program)
        if printed is not None:  # what its program prints, not what its prose claims it prints (as `same_answer`)
            text = f"Program output:\n{printed}"
        elif not any(method in ("boxed", "answer_line", "answer_phrase") for _, method in answer_spans(text)):
            return None
        verdict = self.verify_text(text)
        if verdict is None or verdict.success:
            return None
        extracted = verdict.details.get("extracted")
        return None if extracted is None else str(extracted)

    def failing_code(self, text: str) -> str | None:
        """What the task's tests report of the code in `text` (its first failure, shortened) when that code defines
        the task's function (`entry_point`) and fails them; None for a task that is not coding, no verifier, code
        that defines something else (a helper, a test script), or a verdict the checks call suspect. The coding
        task's counterpart of `wrong_answer`: code that fails the tests is not a correct step and not a correction.
        On the 2026-11-28 slice (seed 4) AG2 HumanEval+ 144 spent 23 minutes replaying seven fixes that each kept
        the failing `% 1 == 0` check; on the main job MBPP 310's `tuple(list(s))` was replayed and failed."""
        if self.task is None or self.verify is None or self.task.kind != "coding":
            return None
        entry = self.task.metadata.get("entry_point")
        if not entry:
            return None
        code, _how = extract_code(text, entry)
        if not defines(code, str(entry)):
            return None
        verdict = self.verify_text(text)
        if verdict is None or verdict.success or is_suspect(verdict):
            return None
        failures = verdict.details.get("failures") or []
        first = failures[0] if failures and isinstance(failures[0], dict) else None
        if first is None:
            said = verdict.details.get("error") or verdict.details.get("stderr") or f"score {verdict.score:g}"
        else:
            said = ", ".join(f"{k}: {v}" for k, v in first.items() if k in ("assert", "input", "expected", "got", "error"))
        said = " ".join(str(said).split())
        return said if len(said) <= 300 else said[:300] + " ..."

    def ask_at(self, step: Step, *, require_fix: bool, source: Literal["earlier", "sequential", "prior"]) -> tuple[Diagnosis | None, str | None]:
        wrong = None if require_fix else self.wrong_answer(step.content)
        if wrong is not None:
            require_fix = True  # not "is it correct?": the verifier already answered that
            self.notes.append(f"step {step.index} ({step.agent}) states the answer {wrong!r}, which the verifier rejects: "
                              "asked for its correction, not whether it is correct")
        failing = None if require_fix else self.failing_code(step.content)
        if failing is not None:
            require_fix = True
            self.notes.append(f"step {step.index} ({step.agent}) has code that fails the task's tests ({failing}): "
                              "asked for its correction, not whether it is correct")
        failed, tested = self.failed(), self.tested()
        shown = next(s for s in self.base["steps"] if s["index"] == step.index)
        shown = {**shown, "content": shown["full"]}  # the step asked about, whole (the run shows it compact)
        diagnosis, why = ask_valid(
            self.analyzer,
            lambda prev, problem: render("analyzer_at_step.j2", **self.base, failed=failed, step=shown,
                                         require_fix=require_fix, previous_answer=prev, problem=problem),
            lambda answer: validate_diagnosis(self.trajectory, answer, expect_step=step.index,
                                              may_decline=not require_fix, tested=tested, fix_problem=self.fix_problem, rewrite=True),
            self.meter, self.asked, "analyzer_at_step.j2",
        )
        if diagnosis is not None and not diagnosis.declined:
            diagnosis, why = self.written(diagnosis, tested)
        if diagnosis is not None:
            diagnosis = diagnosis.model_copy(update={"source": source})
        return diagnosis, why

    def written(self, diagnosis: Diagnosis, tested: set[tuple[int, str]]) -> tuple[Diagnosis | None, str | None]:
        """`diagnosis` with its fix written out. A described change (`instruction`) is the analyzer's finding
        that step t is wrong without the message that corrects it: the step is taken again by the analyzer's
        model in the agent's seat from the agent's recorded request (`retake_step`), else the description is
        made in the step's message (`rewrite_step`); what comes out is checked as any fix (`check_fix`)."""
        if diagnosis.instruction is None or diagnosis.fix:
            return diagnosis, None
        step = self.trajectory.steps[diagnosis.step]
        tries: list[tuple[Literal["retake", "rewrite"], Callable[[], tuple[str | None, str | None]]]] = []
        messages = self.step_request(step) if self.step_request is not None else None
        if messages:
            tries.append(("retake", lambda: self.retake(step, messages, tested)))
        tries.append(("rewrite", lambda: rewrite_step(self.analyzer, step, diagnosis.instruction or "", diagnosis.reason,
                                                      self.base["question"], self.meter, self.asked)))
        whys = []
        for how, write in tries:
            text, why = write()
            if text is not None:
                why = check_fix(step, text, tested=tested, fix_problem=self.fix_problem)
                if why is None:
                    return diagnosis.model_copy(update={"fix": text, "written": how}), None
                self.asked.append(Asked(prompt_name=f"{how}_step", answer=text, problem=why))
            whys.append(f"{how}: {why}")
        return None, f"the described fix of step {step.index} could not be written out ({'; '.join(whys)})"

    def retake(self, step: Step, messages: list[dict[str, Any]],
               tested: set[tuple[int, str]]) -> tuple[str | None, str | None]:
        """`step` retaken in its agent's seat, once per search (`retakes`), each answer checked as a fix (a refused
        one is re-asked once with the problem stated)."""
        if step.index not in self.retakes:
            self.retakes[step.index] = retake_step(
                self.analyzer, messages, step, self.meter, self.asked,
                check=lambda text: check_fix(step, text, tested=tested, fix_problem=self.fix_problem))
        return self.retakes[step.index]

    # -------------------------------------------------------------- replays

    def attempt(self, diagnosis: Diagnosis, joint: Sequence[Diagnosis] = (), early_control: bool = False) -> Attempt:
        """Replay `diagnosis`'s fix (with `joint`'s, a joint fix) and, when it flips, check the flip. With
        `early_control` (the ranked phase, where a fix often flips), the step's control is replayed at the same
        time as the fix, beside it (`_beside`): a flip's proof then costs no extra replay's wait."""
        def fix(d: Diagnosis) -> Intervention:
            return Intervention(run_id=self.trajectory.id, step=d.step, new_content=d.fix, kind="fix", agent=d.agent,
                                tool_calls=d.tool_calls)

        intervention = fix(diagnosis).model_copy(update={"also": [fix(d) for d in joint]})
        early = early_control and self.early_controls and not joint and self.needs_control(diagnosis.step)
        with self._beside(diagnosis.step if early else None) as beside:
            row, result, verdict = try_intervention(self.trajectory, intervention, self.replay, self.meter,
                                                      "counterfactual", self.success_before)
        original = self.trajectory.steps[diagnosis.step].content
        attempt = Attempt(diagnosis=diagnosis, replay=row, joint=list(joint),
                          edit=edit_size(original, diagnosis.fix, self.task, self.run_program),
                          beside=[r for r, _ in beside])
        attempt.repeated = (row.success_after is False and result is not None
                            and same_text(result.final_answer or "", self.trajectory.final_answer or ""))
        if row.success_after is False:
            attempt.said = replay_said(result, verdict)
        if row.success_after is True and self.task is not None and self.verify is not None and not joint:
            attempt.presentation_only = same_answer(self.task, original, diagnosis.fix, self.verify, self.run_program)
        if attempt.flipped:
            ready = self.controls_by_step.pop(diagnosis.step, []) if not joint else []
            attempt.check = check_flip(
                self.trajectory, intervention, lambda r, v: r.success_after, self.replay, self.meter, "counterfactual",
                controls=self.controls, repeats=self.repeats, success_before=self.success_before,
                deterministic=None if self.deterministic is None else self.deterministic(diagnosis.step),
                ready_controls=ready)
        self.attempts.append(attempt)
        if attempt.success and (self.best is None or diagnosis.step < self.best.diagnosis.step):
            self.best, self.fixed_run = attempt, result
        return attempt

    def needs_control(self, step: int) -> bool:
        """Whether a flip at `step` would need a control replayed that has not been run yet."""
        proven = self.deterministic is not None and self.deterministic(step) is not None
        return self.controls > 0 and not proven and not self.controls_by_step.get(step)

    @contextmanager
    def _beside(self, step: int | None) -> Iterator[list[tuple[Replay, Verdict | None]]]:
        """Replay the control of `step` in another thread while the block runs (None: nothing), and keep it
        for that step's flip check (`controls_by_step`); the block gets the list its row lands in. The two
        replays share the engines' slots."""
        done: list[tuple[Replay, Verdict | None]] = []
        if step is None:
            yield done
            return

        def control() -> None:
            row, _result, verdict = control_of(self.trajectory, step, self.replay, self.meter, "counterfactual",
                                               self.success_before)
            done.append((row, verdict))

        thread = threading.Thread(target=control, name=f"control-step-{step}", daemon=True)
        thread.start()
        try:
            yield done
        finally:
            thread.join()
            self.controls_by_step.setdefault(step, []).extend(done)

    # -------------------------------------------------------------- phases

    def ranked(self) -> None:
        for _ in range(self.meter.budget.max_candidates):
            stop = self.meter.cannot_replay("the ranked search")
            if stop:
                self.notes.append(f"ranked search stopped: {stop}")
                return
            diagnosis, why = self.ask_ranked()
            if diagnosis is None:
                self.notes.append(f"ranked search stopped: {why}")
                return
            if isinstance(diagnosis, NoAgentError):
                self.no_agent_error = self.confirm(diagnosis)
                return
            if self.attempt(diagnosis, early_control=True).success:
                return

    def confirm(self, finding: NoAgentError) -> NoAgentError:
        """Ask the task's verifier whether the step the analyzer names does state a right answer."""
        if self.task is None or self.verify is None:
            return finding
        t = self.trajectory
        text = t.final_answer or "" if finding.answer_step is None else t.steps[finding.answer_step].content
        return finding.model_copy(update={"confirmed": right_answer_in(self.task, text, self.verify, last_number=True)})

    def by_prior(self, prior: Sequence[int]) -> None:
        """The ranked phase with a prior: ask about the prior's agent steps in its order (the analyzer may judge
        one correct: no replay), at most `max_candidates` of them, until a fix succeeds."""
        agent_steps = {s.index for s in self.trajectory.steps if s.kind == "agent"}
        for index in [i for i in dict.fromkeys(prior) if i in agent_steps][: self.meter.budget.max_candidates]:
            what = f"the prior search before step {index}"
            stop = self.meter.cannot_replay(what) or self.meter.cannot_ask(what)
            if stop:
                self.notes.append(f"prior search stopped before step {index}: {stop}")
                return
            diagnosis, why = self.ask_at(self.trajectory.steps[index], require_fix=False, source="prior")
            if diagnosis is None:
                self.notes.append(f"step {index}: no correction tried ({why})")
            elif diagnosis.declined:
                self.declined.append(diagnosis)
            elif self.attempt(diagnosis, early_control=True).success:
                return

    def scan(self, *, require_fix: bool, source: Literal["earlier", "sequential"]) -> None:
        if self.no_agent_error is not None:
            return
        limit = self.best.diagnosis.step if self.best is not None else len(self.trajectory.steps)
        for step in self.trajectory.steps[:limit]:
            if step.kind != "agent" or step.index in self.tried_steps():
                continue
            what = f"the {source} scan before step {step.index}"
            stop = self.meter.cannot_replay(what) or self.meter.cannot_ask(what)
            if stop:
                self.notes.append(f"{source} scan stopped before step {step.index}: {stop}")
                return
            diagnosis, why = self.ask_at(step, require_fix=require_fix, source=source)
            if diagnosis is None:
                self.notes.append(f"step {step.index}: no correction tried ({why})")
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
        limit = self.best.diagnosis.step if self.best is not None else len(self.trajectory.steps)
        erring: dict[int, Diagnosis] = {}
        for a in self.decided():
            if a.replay.success_after is False and a.diagnosis.step < limit:
                erring[a.diagnosis.step] = a.diagnosis  # the last fix tried at that step
        if len(erring) < 2:
            return
        stop = self.meter.cannot_replay(f"the joint fix of steps {sorted(erring)}")
        if stop:
            self.notes.append(f"joint fix of steps {sorted(erring)} not tried: {stop}")
            return
        first, *rest = [erring[i].model_copy(update={"source": "joint"}) for i in sorted(erring)]
        self.attempt(first, rest)

    def open_earlier(self, step: int) -> list[int]:
        """Agent steps before `step` that were neither replayed with a fix that decided something nor judged
        correct by the analyzer: while any remain, `step` is not established as the earliest."""
        closed = ({a.diagnosis.step for a in self.decided() if a.replay.success_after is not None and not a.success}
                  | {d.step for d in self.declined})
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
        spare = [row for rows in self.controls_by_step.values() for row, _ in rows]
        replays = list({r.id: r for a in self.attempts for r in a.rows()}.values())  # in order, each once
        leaks = answer_leaks(self.asked)
        evidence_notes = [
            ("steps " + "+".join(map(str, a.steps)) if a.joint else f"step {a.diagnosis.step}")
            + f" ({a.diagnosis.agent}, {a.diagnosis.source}"
            + {"rewrite": ", written from the analyzer's description",
               "retake": ", retaken by the analyzer's model in the agent's seat"}.get(a.diagnosis.written or "", "") + "): "
            + ("succeeded" if a.success else f"succeeded, not causal: {a.not_causal}" if a.not_causal
               else f"succeeded, not accepted: {a.presentation_only}" if a.presentation_only
               else "diverged" if a.replay.divergence else "replay error" if a.replay.error else "still failed")
            + f" [{a.replay.id}]"
            + (f"; controls: {a.check.effect.control_flips}/{a.check.effect.control_trials} flipped"
               + (f" ({a.check.proven_identical} proven identical: {a.check.proven_why})" if a.check.proven_identical else "")
               if a.check is not None else "")
            for a in self.attempts
        ] + [f"step {d.step} ({d.agent}): judged correct by the analyzer" for d in self.declined] + [
            f"step {r.intervention.step}: control replayed beside a fix that did not flip "
            f"({'flipped' if r.success_after else 'still failed' if r.success_after is False else 'decided nothing'}) "
            f"[{r.id}]" for r in spare] + [
            f"answer_leak rejected: {x.problem[len('answer_leak: '):]}" for x in leaks] + self.notes
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
        common = dict(run_id=t.id, framework=t.framework, benchmark=t.benchmark, method="counterfactual",
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
            annotation = Annotation(
                **common, agent=best.diagnosis.agent, step=best.diagnosis.step, verified=not open_steps,
                status="labelled" if not open_steps else "unproven_earliest", steps=best.steps,
                proof_replay_id=best.replay.id, edit=best.edit,
                flip_check=best.check.summary(), confidence=best.check.effect.confidence,
                earliest="established" if not open_steps else "unproven",
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
                     run_program, early_controls)
    if prior is not None:
        search.by_prior(prior)
    if search.best is None:
        search.ranked()
    search.scan(require_fix=False, source="earlier")
    search.joint()
    return search.result("rootstep")


def sequential_scan(
    trajectory: Trajectory,
    verdict: Verdict | None = None,
    task_context: TaskContext | None = None,
    analyzer: ChatLike | None = None,
    replay: ReplayFn | None = None,
    budget: Budget | None = None,
    *,
    max_prompt_chars: int = 24_000,
    verify: Verify | None = None,
) -> CounterfactualResult:
    """The naive baseline: from step 0, ask for a fix of every agent step and re-simulate each, stopping
    at the first success (which is then the earliest). No analyzer ranking; the analyzer may not
    declare a step correct. Paired with a replay callable that re-runs everything live (no prefix
    replay), it is the "sequential scan that re-simulates every step live" of the benchmark.
    """
    if analyzer is None or replay is None:
        raise TypeError("sequential_scan needs an analyzer and a replay callable")
    search = _Search(trajectory, verdict, task_context or TaskContext.of(trajectory), analyzer, replay,
                     budget or Budget(max_replays=len(trajectory.steps), max_llm_calls=4 * len(trajectory.steps)),
                     max_prompt_chars, verify)
    search.scan(require_fix=True, source="sequential")
    return search.result("sequential")
