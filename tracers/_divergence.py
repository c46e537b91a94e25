"""Divergence (trajectory analysis): align a failed run with a successful run of the same task and return
the first agent step where the failure departs from it.

The counterpart is a successful run of the same task, framework and benchmark: the run a counterfactual
fix of THIS run produced (its prefix is the recording, so the two agree exactly up to the fix) is
preferred, then other samples of the task; among several, the one the failure follows longest is used.
No counterpart: the method refuses (`TracerError`), it never guesses.

Alignment: every step becomes a token `(agent, kind, content)`, the content normalised (case, whitespace)
and compared by similarity: a failed step whose agent and kind equal a successful step's and whose text is
at least `similarity` alike (difflib ratio) takes that step's token. `difflib.SequenceMatcher` then aligns
the two token sequences; the failure departs at its first step outside the matching blocks. Edge cases:
* the first departing step is a tool / environment / human step: the first departing AGENT step at or
  after it is returned (the environment answered differently, an agent then acted differently); if no
  agent step departs after it, the last agent step before it;
* the failed run is a prefix of the successful one (it stopped early): its last agent step;
* the two runs are the same throughout: no departure, `error` says so.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from rootstep.model import Trajectory
from rootstep.warehouse import Warehouse

from ._methods import Attribution, TracerError, as_trajectory, tracer

DEFAULT_SIMILARITY = 0.8
COMPARE_CHARS = 2000
MAX_COUNTERPARTS = 5
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower case, whitespace collapsed, capped: what two steps are compared on."""
    return _SPACE.sub(" ", text.lower()).strip()[:COMPARE_CHARS]


def similarity(a: str, b: str, floor: float = 0.0) -> float:
    """difflib's ratio of two normalised texts (1.0 when equal). Below `floor` an upper bound may be
    returned instead (cheap bounds first: a pair that cannot reach the floor is not compared in full)."""
    if a == b:
        return 1.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for bound in (matcher.real_quick_ratio, matcher.quick_ratio):
        upper = bound()
        if upper < floor:
            return upper
    return matcher.ratio()


@dataclass
class Alignment:
    """Where a failed run departs from a successful one."""

    departure: int | None
    """First failed-run step outside the matching blocks (None: the runs agree throughout)."""
    counterpart_step: int | None
    """The successful run's step at the same place (None when the failure ran past its end)."""
    matched: int
    """Failed-run steps inside matching blocks before the departure."""
    pairs: list[tuple[int, int]]
    """(failed step, successful step) of every matched pair, in order."""


def align(failed: Trajectory, success: Trajectory, min_similarity: float = DEFAULT_SIMILARITY) -> Alignment:
    """Align the two step sequences on (agent, kind, content similar at `min_similarity`)."""
    success_text = [normalise(s.content) for s in success.steps]
    success_tokens = [("s", i) for i in range(len(success.steps))]
    failed_tokens: list[tuple[str, int]] = []
    for j, step in enumerate(failed.steps):
        text = normalise(step.content)
        alike = [(score, -abs(i - j), i) for i, other in enumerate(success.steps)
                 if other.agent == step.agent and other.kind == step.kind
                 and (score := similarity(text, success_text[i], min_similarity)) >= min_similarity]
        # the most similar successful step; among equals the nearest in position
        failed_tokens.append(("s", max(alike)[2]) if alike else ("f", j))
    matcher = difflib.SequenceMatcher(None, failed_tokens, success_tokens, autojunk=False)
    pairs = [(a + k, b + k) for a, b, size in matcher.get_matching_blocks() for k in range(size)]
    for tag, i1, _, j1, _ in matcher.get_opcodes():
        if tag != "equal":
            if i1 >= len(failed.steps):  # only the successful run goes on: the failure stopped early
                return Alignment(len(failed.steps), j1, i1, pairs)
            return Alignment(i1, j1 if j1 < len(success.steps) else None, i1, pairs)
    return Alignment(None, None, len(failed.steps), pairs)


def find_counterparts(warehouse: Warehouse, trajectory: Trajectory, run_id: str | None = None) -> list[tuple[str, Trajectory]]:
    """Successful runs of the same task, framework and benchmark: this run's counterfactual fixes first."""
    run_id = run_id or trajectory.id
    rows = warehouse.rows(
        "SELECT id, parent_run_id FROM runs WHERE success AND id <> ? AND framework = ? AND benchmark = ? "
        "AND (task_id = ? OR id IN (SELECT result_run_id FROM replays WHERE run_id = ? AND success_after)) "
        "ORDER BY (parent_run_id IS NOT DISTINCT FROM ?) DESC, (parent_run_id IS NULL) DESC, id LIMIT ?",
        [run_id, trajectory.framework, trajectory.benchmark, trajectory.task_id, run_id, run_id, MAX_COUNTERPARTS],
    )
    if not rows:
        return []
    found = dict(warehouse.trajectories("id IN (SELECT unnest(?))", [[r["id"] for r in rows]]))
    return [(r["id"], found[r["id"]]) for r in rows if r["id"] in found]


def _departing_agent_step(failed: Trajectory, alignment: Alignment) -> tuple[int | None, str]:
    steps = failed.steps
    start = alignment.departure
    if start is None:
        return None, ""
    if start >= len(steps):
        last = max((s.index for s in steps if s.kind == "agent"), default=None)
        return last, "the failed run stops where the successful one goes on; its last agent step"
    matched = {a for a, _ in alignment.pairs}
    for step in steps[start:]:
        if step.kind == "agent" and step.index not in matched:
            note = "" if step.index == start else (
                f"the runs first differ at {steps[start].kind} step {start} ({steps[start].agent}); the first "
                "agent step to depart after it")
            return step.index, note
    before = max((s.index for s in steps[:start] if s.kind == "agent"), default=None)
    return before, f"only non-agent steps depart (from step {start}); the last agent step before them"


@tracer("divergence")
def divergence(
    trace: Trajectory | dict[str, Any],
    warehouse: Warehouse | None = None,
    run_id: str | None = None,
    counterpart: Trajectory | dict[str, Any] | None = None,
    min_similarity: float = DEFAULT_SIMILARITY,
    with_ground_truth: bool = True,
) -> Attribution:
    """The first agent step where the failed run departs from a successful run of the same task.

    `counterpart` is a successful trace to compare with; without it one is looked up in `warehouse`
    (see the module docstring). Raises `TracerError` when the run succeeded or no counterpart exists.
    """
    t = as_trajectory(trace)
    if t.success:
        raise TracerError(f"run {run_id or t.id} succeeded: there is no failure to attribute")
    if counterpart is not None:
        candidates = [("<counterpart>", as_trajectory(counterpart))]
    elif warehouse is not None:
        candidates = find_counterparts(warehouse, t, run_id)
    else:
        candidates = []
    if not candidates:
        where = f" in {warehouse.location}" if warehouse is not None else ""
        raise TracerError(
            f"no successful run of task {t.task_id!r} ({t.framework}, {t.benchmark}){where} to compare with: divergence "
            "needs one (another sample of the task, or the run a counterfactual fix produced); pass one with "
            "--counterpart FILE_OR_RUN"
        )
    # the counterpart the failure follows longest (ties: the preferred order above)
    scored = [(cid, c, align(t, c, min_similarity)) for cid, c in candidates]
    cid, success, alignment = max(scored, key=lambda x: x[2].matched)
    result = Attribution(method="divergence", model="difflib", with_ground_truth=with_ground_truth,
                         details={"counterpart": cid, "departure": alignment.departure,
                                  "counterpart_step": alignment.counterpart_step, "matched_steps": alignment.matched,
                                  "counterparts_compared": len(scored)})
    step, note = _departing_agent_step(t, alignment)
    if step is None:
        result.error = (f"the failed run does not depart from the successful run {cid}" if alignment.departure is None
                        else "no agent step in the failed run")
        return result
    result.step, result.agent = step, t.steps[step].agent
    where = (f"its step {alignment.counterpart_step} ({success.steps[alignment.counterpart_step].agent})"
             if alignment.counterpart_step is not None and alignment.counterpart_step < len(success.steps) else "its end")
    result.reason = (f"the failure follows the successful run {cid} for {alignment.matched} step(s), then departs at "
                     f"step {step} ({result.agent}); the success has {where} there")
    if note:
        result.notes.append(note)
    return result
