"""Trying: a proposed fix or corruption forced at its step, the run replayed, and the flip put to the test.

The second phase of a search (after `_propose`): `try_intervention` replays one intervention and meters it
(one `Replay` row per try), `check_flip` repeats a flip and replays its controls (the step unchanged, the
rest live) for the label's `confidence` (`_confidence`), and `edit_size` measures what the change did to the
step. `FixTrial` is the counterfactual search's use of them (`Attempt`). Neither knows about Prefect,
adapters or the warehouse: the replay is a callable the caller builds (an adapter's `replay` with the
gateway's stats, or a simulation).
"""

from __future__ import annotations

import difflib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rootstep.benchmarks import RunProgram, Verify, gives_answer, same_answer
from rootstep.model import (
    Edit,
    FlipProof,
    Intervention,
    LLMCall,
    Replay,
    ReplayPurpose,
    Step,
    Task,
    Trajectory,
    Usage,
    Verdict,
)

from ._budget import Meter
from ._confidence import Effect, effect
from ._propose import Diagnosis, failed_turn, same_text

# ------------------------------------------------------------------------------------ replaying


class ReplayOutcome(BaseModel):
    """What a replay callable reports beside the run: its cost, and whether it can be trusted."""

    model_config = ConfigDict(extra="forbid")

    cost: Usage = Field(default_factory=lambda: Usage(replays=1))
    """Live calls (`llm_calls`), prefix calls served from the recording (free), tokens, USD, wall seconds."""
    divergence: str | None = None
    """The gateway's diff when a prefix request was not in the recording (the replay is not trusted)."""
    error: str | None = None


ReplayFn = Callable[[Intervention], "tuple[Trajectory, Verdict, ReplayOutcome]"]
"""Re-simulate the run with one intervention; Omega's verdict on the result decides."""


def try_intervention(
    trajectory: Trajectory,
    intervention: Intervention,
    replay: ReplayFn,
    meter: Meter,
    purpose: ReplayPurpose,
    success_before: bool | None = None,
) -> tuple[Replay, Trajectory | None, Verdict | None]:
    """Replay with `intervention`, meter it, and return its `Replay` row (plus the result run).

    A replay that raises, or whose gateway reports a divergence, yields a row with `error` /
    `divergence` and no `success_after`: it decides nothing. `success_before` defaults to the
    trajectory's own verdict.
    """
    started = time.perf_counter()
    result: Trajectory | None = None
    verdict: Verdict | None = None
    try:
        result, verdict, outcome = replay(intervention)
    except Exception as exc:
        outcome = ReplayOutcome(error=f"{type(exc).__name__}: {str(exc)[:2000]}")
    cost = outcome.cost.model_copy(update={"replays": 1, "seconds": round(outcome.cost.seconds or (time.perf_counter() - started), 6)})
    meter.add_replay(cost, control=intervention.kind == "control")
    if result is not None and result.parent_run_id is None:
        result = result.model_copy(update={"parent_run_id": trajectory.id})
    decided = outcome.error is None and outcome.divergence is None and verdict is not None
    row = Replay(
        run_id=trajectory.id,
        framework=trajectory.framework,
        benchmark=trajectory.benchmark,
        intervention=intervention,
        purpose=purpose,
        result_run_id=None if result is None else result.id,
        success_before=trajectory.success if success_before is None else success_before,
        success_after=verdict.success if decided and verdict is not None else None,
        cost=cost,
        divergence=outcome.divergence,
        error=outcome.error,
    )
    return row, result, verdict if decided else None


def replay_said(result: Trajectory | None, verdict: Verdict | None, max_chars: int = 700) -> str | None:
    """What a replay that still failed ended with, as the analyzer reads it beside the fix it tested: the
    re-simulated run's final answer (its end, where the answer sits; its lines and a code block's indentation
    kept, blank lines dropped) and the verifier's verdict details."""
    if result is None or verdict is None:
        return None
    lines = [" ".join(line.split()) if not line.startswith((" ", "\t")) else line.rstrip()
             for line in (result.final_answer or "").strip().splitlines() if line.strip()]
    final = "\n".join(lines)
    half = max_chars // 2
    final = final if len(final) <= half else "... " + final[-half:]
    details = json.dumps(verdict.details, sort_keys=True, default=str) if verdict.details else ""
    room = max_chars - len(final)
    details = details if len(details) <= room else details[:room] + " ..."
    # the answer's lines kept (escaped as the fix beside it is): with its code flattened onto one line, the
    # 1.5B copied it into its next fix, a program that was one comment (slice of 2026-11-28, MATH-500 255)
    return f"final answer: {json.dumps(final, ensure_ascii=False)}" + (f"; verifier: {details}" if details else "")


# ------------------------------------------------------------------------------------ controls


DETERMINISTIC_PROVIDERS = ("scripted",)
"""Providers whose answer is a function of the request at temperature 0: scripted models. A cached
response (`mode == "cached"`) is deterministic whatever its provider. The local llama.cpp models are NOT:
their prompt cache and batched decoding change the floating-point sums, and greedy decoding then picks
other tokens. Measured: the same AG2 request at temperature 0 to local/qwen2.5-coder-0.5b got two
different answers in two runs of the main job's slice (GSM8K test-1101, the coder's second call), and
one run succeeded where the other failed. Their controls are replayed like a remote model's."""

Deterministic = Callable[[int], "str | None"]
"""`step -> why` a control replay of `step` would reproduce the recorded run exactly (no live call
needed), or None when its later calls are sampled."""


def proven_identical(recorded: Sequence[LLMCall], step: Step) -> str | None:
    """Why a control replay of `step` (its recorded response forced, everything after it live) must
    reproduce the recording: every recorded call after the step's own was answered deterministically
    (a cached response, or temperature 0 on a deterministic provider). Then the same requests come
    again and get the same answers, so the control is the recorded run. None when any later call was
    sampled (or the step's call is not in the recording)."""
    ids = set(step.call_ids)
    recorded = sorted(recorded, key=lambda c: c.created_at)  # answer order (a warehouse read is unordered)
    positions = [i for i, c in enumerate(recorded) if c.id in ids or (not ids and c.step_index == step.index)]
    if not positions:
        return None
    later = list(recorded[positions[-1] + 1:])
    for c in later:
        temperature = (c.request or {}).get("temperature")
        if c.mode == "cached":
            continue
        if c.provider in DETERMINISTIC_PROVIDERS and temperature is not None and float(temperature) == 0.0:
            continue
        return None
    if not later:
        return f"no LLM call came after step {step.index} in the recording: the control replays the recording"
    providers = sorted({c.provider for c in later})
    return (f"the {len(later)} recorded call(s) after step {step.index} were answered deterministically "
            f"(temperature 0 on {', '.join(providers) or 'no provider'}, or cached): the control replays the recording")


def control_of(trajectory: Trajectory, step: int, replay: ReplayFn, meter: Meter, purpose: ReplayPurpose,
               success_before: bool | None = None) -> tuple[Replay, Trajectory | None, Verdict | None]:
    """One control replay of `step`: its recorded response forced unchanged, the rest of the run live."""
    recorded = trajectory.steps[step]
    control = Intervention(run_id=trajectory.id, step=step, new_content=recorded.content, kind="control",
                           agent=recorded.agent)
    return try_intervention(trajectory, control, replay, meter, purpose, success_before)


class FlipCheck(BaseModel):
    """One flip put to the test: the intervention's replays (repeats) and the controls beside them."""

    repeats: list[Replay] = Field(default_factory=list)
    """Further replays with the intervention (`--repeats N` gives N - 1 of them; the first is the attempt's)."""
    controls: list[Replay] = Field(default_factory=list)
    """Control replays that ran (the step forced unchanged)."""
    proven_identical: int = 0
    """Controls not replayed because the provider is deterministic for them (`proven_why`)."""
    proven_why: str | None = None
    effect: Effect
    causal: bool
    why_not: str | None = None
    """Why the flip is not the intervention's effect (`not_causal`)."""

    def summary(self) -> FlipProof:
        """What the label keeps of the check (`Annotation.flip_check`)."""
        return FlipProof(flips=self.effect.flips, trials=self.effect.trials, control_flips=self.effect.control_flips,
                         control_trials=self.effect.control_trials, controls_replayed=[r.id for r in self.controls],
                         controls_proven_identical=self.proven_identical, proven_identical_because=self.proven_why,
                         repeat_replays=[r.id for r in self.repeats], difference=self.effect.difference,
                         interval=[self.effect.low, self.effect.high], confidence=self.effect.confidence)


def check_flip(
    trajectory: Trajectory,
    intervention: Intervention,
    flipped: Callable[[Replay, "Verdict | None"], "bool | None"],
    replay: ReplayFn,
    meter: Meter,
    purpose: ReplayPurpose,
    *,
    controls: int = 1,
    repeats: int = 1,
    deterministic: str | None = None,
    success_before: bool | None = None,
    step_controls: list[tuple[Replay, "Verdict | None"]] | None = None,
) -> FlipCheck:
    """Is a flip seen with `intervention` (its first replay, which the caller judged) the intervention's effect?

    The intervention is replayed `repeats - 1` more times and the step left as recorded (a `control`
    intervention: its recorded response forced, the rest live, as in the intervention's replay)
    `controls * repeats` times. `flipped(row, verdict)` judges each replay (None: it decided nothing).
    The flip is causal when most intervention replays flip and fewer than half of the decided controls do;
    a control that flips as well shows a re-roll. With `deterministic` (why the later calls are answered
    the same every time: `proven_identical`) no control is replayed: each is recorded as proven identical
    to the recorded run, which did not flip. Controls and repeats always run once a flip is seen (they are
    the label's proof); they count in the meter's replays, controls apart (`Meter.control_replays`).
    `step_controls`: control replays of this step already run (`control_of`: beside the fix's replay, or for an
    earlier fix of the same step), used before any new one is run: a control does not depend on the fix; the
    controls this check replays are added to it, for a later fix of the same step.
    """
    outcomes: list[bool | None] = [True]  # the caller's replay, which flipped
    repeat_rows: list[Replay] = []
    for _ in range(max(repeats, 1) - 1):
        row, _result, verdict = try_intervention(trajectory, intervention, replay, meter, purpose, success_before)
        repeat_rows.append(row)
        outcomes.append(flipped(row, verdict))
    wanted = max(controls, 0) * max(repeats, 1)
    control_rows: list[Replay] = []
    control_outcomes: list[bool | None] = []
    proven = 0
    if deterministic is not None:
        proven = wanted
    else:
        ready = list(step_controls or [])[:wanted]
        for row, verdict in ready:
            control_rows.append(row)
            control_outcomes.append(flipped(row, verdict))
        for _ in range(wanted - len(ready)):
            row, _result, verdict = control_of(trajectory, intervention.step, replay, meter, purpose, success_before)
            control_rows.append(row)
            control_outcomes.append(flipped(row, verdict))
            if step_controls is not None:
                step_controls.append((row, verdict))
    decided = [o for o in outcomes if o is not None]
    decided_controls = [o for o in control_outcomes if o is not None]
    flips, trials = sum(decided), len(decided)
    control_flips, control_trials = sum(decided_controls), len(decided_controls) + proven
    result = effect(flips, trials, control_flips, control_trials, controls_exact=proven > 0 and not control_rows)
    why_not = None
    if 2 * flips <= trials:
        why_not = f"the intervention flipped the run in {flips} of {trials} replays"
    elif wanted and control_trials == 0:
        why_not = "no control replay decided anything (each raised or diverged)"
    elif control_trials and 2 * control_flips >= control_trials:
        why_not = (f"the run flipped without the intervention too: {control_flips} of {control_trials} control "
                   "replays (the step unchanged) flipped, so the flip is a re-roll")
    return FlipCheck(repeats=repeat_rows, controls=control_rows, proven_identical=proven,
                     proven_why=deterministic, effect=result, causal=why_not is None, why_not=why_not)


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|==|!=|<=|>=|//|\*\*|[-+*/%<>=]")
_ARITHMETIC = re.compile(r"\b(?:subtract\w*|addition|plus|minus|multipl\w*|divid\w*|division|quotient|"
                         r"sum of|product of|difference of)\b", re.IGNORECASE)
"""Words that claim an arithmetic operation was changed (not "add", which also means "append")."""
_OPERATOR_WORDS = {
    "+": ("add", "plus", "sum", "addition", "adding", "increase"),
    "-": ("subtract", "minus", "difference", "subtraction", "subtracting", "subtracted", "decrease"),
    "*": ("multiply", "times", "product", "multiplication", "multiplying", "multiplied"),
    "/": ("divide", "division", "dividing", "divided", "quotient", "ratio"),
    "//": ("divide", "division", "floor", "integer"),
    "%": ("modulo", "remainder", "mod"),
    "**": ("power", "exponent", "square", "squared"),
    "<": ("less", "smaller", "lower"), ">": ("greater", "larger", "bigger", "higher"),
    "<=": ("less", "smaller", "lower", "most"), ">=": ("greater", "larger", "least"),
    "==": ("equal", "equals", "same"), "!=": ("equal", "different", "unequal"),
}
_STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it its of on or not no that the then this to was were with "
    "which will should would step agent code value values line lines instead changed change changes".split())
MAX_SUMMARY_CHARS = 400
_PIECE = re.compile(r"\w+|\s+|[^\w\s]+")


def _changed_tokens(original: str, new: str) -> list[tuple[list[str], list[str]]]:
    """The stretches an edit changed, as (tokens removed, tokens inserted) pairs (identifiers whole, numbers,
    operators; a word-level diff, so tokens on unchanged stretches are not changes)."""
    a, b = _TOKEN.findall(original), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def edit_summary(original: str, new: str, max_chars: int = MAX_SUMMARY_CHARS) -> str:
    """What an edit did, read from the two texts (never from anyone's account of it): the changed lines as
    `- old` / `+ new` pairs, or `replaced 'x' with 'y'` when one line changed within 80 characters."""
    old_lines, new_lines = original.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changes) == 1 and changes[0][0] == "replace" and changes[0][2] - changes[0][1] == 1 == changes[0][4] - changes[0][3]:
        _, i1, _, j1, _ = changes[0]
        x, y = old_lines[i1], new_lines[j1]
        xs, ys = _PIECE.findall(x), _PIECE.findall(y)  # whole words and operators, not characters
        inner = difflib.SequenceMatcher(None, xs, ys, autojunk=False)
        spans = [op for op in inner.get_opcodes() if op[0] != "equal"]
        old, new = "".join(xs[spans[0][1]:spans[-1][2]]), "".join(ys[spans[0][3]:spans[-1][4]])
        if max(len(old), len(new)) <= 80:  # one stretch of the line (its first to its last change)
            text = f"replaced {old!r} with {new!r} in the line {y.strip()!r}"
            return text if len(text) <= max_chars else text[: max_chars - 4] + " ..."
    parts = []
    for _, i1, i2, j1, j2 in changes:
        parts += [f"- {line.strip()}" for line in old_lines[i1:i2] if line.strip()]
        parts += [f"+ {line.strip()}" for line in new_lines[j1:j2] if line.strip()]
    text = "; ".join(parts) or "whitespace only"
    return text if len(text) <= max_chars else text[: max_chars - 4] + " ..."


def unfounded_description(description: str, original: str, new: str) -> str | None:
    """Why `description` (a perturber's account of its corruption) is not an account of the edit from
    `original` to `new`, or None. A lexical check, read from the two texts:

    * it claims an arithmetic change (subtract, multiply, division, ...) but the edit wrote no operator and
      no number (none inserted or swapped): the 1.5B wrote "it should subtract ... not add them" for an edit that only
      cut a program down to a bare line of it (no fence, no print: nothing ran);
    * it names nothing the edit changed: no identifier (whole), number or operator removed or inserted
      (an operator also by its word: "subtract" for `-`; a number also by the change: "added 7" for 10 -> 17),
      stop words left out.
    A vague account ("a subtle slip") fails the second test too: the label's reason is then the edit itself."""
    stretches = _changed_tokens(original, new)
    written = {t for removed, inserted in stretches if any(x in _OPERATOR_WORDS for x in inserted)
               for t in removed + inserted if t in _OPERATOR_WORDS}
    numbers = [t for _, inserted in stretches for t in inserted if t[0].isdigit()]
    claimed = sorted({m.group(0).lower() for m in _ARITHMETIC.finditer(description)})
    if claimed and not written and not numbers:
        return f"it speaks of {', '.join(claimed)}, but the edit wrote no operator and no number"
    changed = {t.lower() for removed, inserted in stretches for t in removed + inserted} - _STOPWORDS
    if ({w.lower() for w in _TOKEN.findall(description)} - _STOPWORDS) & changed:
        return None
    said = {w.lower() for w in re.findall(r"[A-Za-z]+", description)}
    if any(said & set(_OPERATOR_WORDS[op]) for op in written):
        return None
    if numbers and re.search(r"\d", description):
        return None  # a number changed and the account gives one (the new value, or the change: "added 7")
    return "it names nothing the edit changed"


def edit_size(original: str, new: str, task: Task | None = None, run_program: RunProgram | None = None) -> Edit:
    """How much a fix or corruption changed its step: characters and lines changed (inserted, deleted or
    replaced, whichever side is longer per change), their share of the step, the length ratio, and what
    changed (`edit_summary`); with the `task`, whether the new text states an answer the step did not
    (`adds_answer`, `gives_answer`)."""
    def changed(a: Sequence[Any], b: Sequence[Any]) -> int:
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=len(a) + len(b) > 20_000)
        return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")

    chars = changed(original, new)
    adds = None if task is None else (gives_answer(task, new, run_program)
                                      and not gives_answer(task, original, run_program))
    return Edit(chars_changed=chars, lines_changed=changed(original.splitlines(), new.splitlines()),
                share=round(chars / max(len(original), len(new), 1), 3),
                growth=round(len(new) / max(len(original), 1), 2), summary=edit_summary(original, new),
                adds_answer=adds)




class Replayed(BaseModel):
    """What both searches keep of an intervention they replayed: the replay, the repeats and controls that put a
    turn of its outcome to the test (`check_flip`), and the edit's size. A search's attempt says what a turn is
    (`turned`: a failure fixed, a success corrupted); a turn is causal only when its controls did not turn."""

    replay: Replay
    check: FlipCheck | None = None
    """Repeats and controls of a turn (`check_flip`)."""
    edit: Edit | None = None
    """The intervention's size (`edit_size`) and whether it states an answer the step did not (`adds_answer`)."""

    @property
    def turned(self) -> bool:
        """The replay's outcome turned the way the search wants (before the controls)."""
        raise NotImplementedError

    @property
    def confirmed(self) -> bool:
        """A turn that the controls confirm."""
        return self.turned and (self.check is None or self.check.causal)

    @property
    def not_causal(self) -> str | None:
        """Why a turn is not causal (its controls turned too), or None."""
        return self.check.why_not if self.turned and self.check is not None else None

    def rows(self) -> list[Replay]:
        """This attempt's replays: the intervention's, then its repeats and controls."""
        return [self.replay] + ([] if self.check is None else self.check.repeats + self.check.controls)


# ------------------------------------------------------------------------------------ the analyzer's fixes


class Attempt(Replayed):
    """A diagnosis that was replayed, and what Omega said."""

    diagnosis: Diagnosis
    presentation_only: str | None = None
    """Why the fix only re-formatted the step's own answer (`same_answer`): such a success verifies nothing."""
    joint: list[Diagnosis] = Field(default_factory=list)
    """A joint fix: the further, later steps fixed in the same replay (`diagnosis` is the earliest)."""
    repeated: bool = False
    """The fixed replay failed with the run's original final answer: later agents carried the error on."""
    said: str | None = None
    """What a replay that still failed ended with (`replay_said`): shown to the analyzer beside the fix."""
    beside: list[Replay] = Field(default_factory=list)
    """Control replays of the step run at the same time as this fix's replay (`early_controls`); a later flip
    at the step may use them."""

    later_turn: int | None = None
    """A multi-turn run (`failed_turn`): the fixed replay failed, but at this later user turn; the turn the run
    failed at passed. That is a flip of the run's first failure (`turned`): a run with independent errors in
    several turns has no single step whose fix makes it succeed, and each turn's first error is decided before
    the next turn begins."""

    stopped_after_turn: int | None = None
    """The replay was stopped after this user turn, the one the run failed at (`Adapter.replay(until_turn=...)`):
    with `later_turn`, it passed that turn and the later ones were not run."""

    @property
    def turned(self) -> bool:
        """The replay succeeded, or got past the user turn the run failed at (`later_turn`), with a fix that
        changed the agent's work (before the controls)."""
        return (self.replay.success_after is True or self.later_turn is not None) and self.presentation_only is None

    @property
    def success(self) -> bool:
        """A flip that the controls confirm (a label candidate)."""
        return self.confirmed

    @property
    def steps(self) -> list[int]:
        return [self.diagnosis.step, *(d.step for d in self.joint)]

    def rows(self) -> list[Replay]:
        """This attempt's replays: the fix, a control run beside it, its repeats, the controls (a control run
        beside an earlier fix of the step and used here appears there too: `result` keeps the first)."""
        first, *checks = super().rows()
        return [first, *self.beside, *checks]


REROLLED_CONTROLS = 3
"""Controls a flip needs once a control of the same search has flipped: one failing control is chance on a team
that re-rolls, three failing ones (the flip causal when fewer than half flip) are a proof."""


class FixTrial:
    """The counterfactual search's replays: a diagnosis's fix forced at its step and the run re-simulated
    (`attempt`), a flip put to its repeats and controls, the edit measured; with `early_controls`, a step's
    control replayed beside its fix (`_beside`) and kept for that step's flip (`controls_by_step`)."""

    def __init__(self, trajectory: Trajectory, success_before: bool | None, task: Task | None, verify: Verify | None,
                 run_program: RunProgram | None, replay: ReplayFn, meter: Meter, controls: int = 1, repeats: int = 1,
                 deterministic: Deterministic | None = None, early_controls: bool = False,
                 failed_at: int | None = None):
        self.trajectory, self.success_before = trajectory, success_before
        self.failed_at = failed_at
        """The user turn the run failed at (multi-turn runs): a replay that gets past it flips the failure."""
        self.task, self.verify, self.run_program = task, verify, run_program
        self.replay, self.meter = replay, meter
        self.controls, self.repeats, self.deterministic = controls, repeats, deterministic
        self.early_controls = early_controls
        self.rerolled = False
        """A control replay of this search flipped the run (the team re-rolls: its later calls, answered live, can
        succeed with no fix), in a flip check or beside a fix that did not flip (`_beside`): every later flip
        check replays at least `REROLLED_CONTROLS` controls."""
        self.controls_by_step: dict[int, list[tuple[Replay, Verdict | None]]] = {}
        """Control replays run for a step (beside a fix's replay or by a flip check), used by every later flip check
        of the step: a control does not depend on the fix (on the flaky AG2 team of the tests, the grounded fix and
        the ranked fix of one step each had a control replayed when they were one-use)."""

    def attempt(self, diagnosis: Diagnosis, joint: Sequence[Diagnosis] = (), early_control: bool = False) -> tuple[Attempt, Trajectory | None]:
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
        if row.success_after is False and self.passed_failed_turn(row, verdict):
            attempt.later_turn = failed_turn(verdict)
            attempt.stopped_after_turn = (verdict.details or {}).get("stopped_after_turn") if verdict is not None else None
        attempt.repeated = (row.success_after is False and result is not None and attempt.later_turn is None
                            and same_text(result.final_answer or "", self.trajectory.final_answer or ""))
        if row.success_after is False and attempt.later_turn is None:
            attempt.said = replay_said(result, verdict)
        if row.success_after is True and self.task is not None and self.verify is not None and not joint:
            attempt.presentation_only = same_answer(self.task, original, diagnosis.fix, self.verify, self.run_program)
        if attempt.turned:
            controls = max(self.controls, REROLLED_CONTROLS) if self.rerolled and self.controls > 0 else self.controls
            attempt.check = check_flip(
                self.trajectory, intervention, self.passed_failed_turn, self.replay, self.meter, "counterfactual",
                controls=controls, repeats=self.repeats, success_before=self.success_before,
                deterministic=None if self.deterministic is None else self.deterministic(diagnosis.step),
                step_controls=None if joint else self.controls_by_step.setdefault(diagnosis.step, []))
            self.rerolled = self.rerolled or attempt.check.effect.control_flips > 0
        return attempt, result

    def passed_failed_turn(self, row: Replay, verdict: Verdict | None) -> bool | None:
        """Whether a replay flipped the failure: it succeeded or, on a multi-turn run, failed only at a later user
        turn than the run did (None: it decided nothing). A control that gets past the turn flips too."""
        if row.success_after is None:
            return None
        later = failed_turn(verdict)
        return row.success_after or (self.failed_at is not None and later is not None and later > self.failed_at)

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
            self.rerolled = self.rerolled or any(self.passed_failed_turn(r, v) for r, v in done)
