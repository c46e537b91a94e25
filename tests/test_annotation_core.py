"""The annotation core: counterfactual search, fault injection, budgets and programmatic perturbations.

The analyzer and perturber are scripted models (`scripted/<name>` through litellm, via `gateway.Chat`).
The replayed "framework" is a small deterministic simulation (`Ledger`) whose decisive step is known: a
team of agents applies arithmetic operations to a running value, one step each, and an agent that
"slips" at a given step writes a wrong value that every later step carries on. Replaying it with an
intervention keeps the prefix (as served from a recording: no live calls), forces the intervened
step, and recomputes the rest live, slipping again at any slip step after the intervention.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from rootstep.gateway import register_script
from rootstep.annotation import (
    Budget,
    ReplayOutcome,
    alter_tool_argument,
    drop_tool_call,
    repeat_tool_call,
    change_constant,
    drop_code_line,
    find_decisive_step,
    flip_operator,
    inject_fault,
    programmatic_perturbations,
    sequential_scan,
    truncate_message,
)
from rootstep.gateway import Chat
from rootstep.model import Intervention, ReplayProvenance, Step, Trajectory, Usage, Verdict

# (agent, kind, operation): the tool step 2 records the value and changes nothing
PLAN = [
    ("Planner", "agent", ("+", 3)),
    ("Solver", "agent", ("*", 2)),
    ("calculator", "tool", None),
    ("Checker", "agent", ("-", 4)),
    ("Planner", "agent", ("+", 10)),
    ("Solver", "agent", ("*", 3)),
    ("Checker", "agent", ("+", 1)),
]
START = 4
VALUE = re.compile(r"value = (-?\d+)")


def apply(op: tuple[str, int], value: int) -> int:
    sign, k = op
    return value + k if sign == "+" else value - k if sign == "-" else value * k


def truth() -> int:
    value = START
    for _, kind, op in PLAN:
        if kind == "agent":
            value = apply(op, value)
    return value


class Ledger:
    """The simulated multi-agent run. `slips`: steps where the agent writes value + 100."""

    def __init__(self, slips: set[int], *, impossible: bool = False):
        self.slips = slips
        self.impossible = impossible  # Omega that no correction can satisfy
        self.replays: list[Intervention] = []

    def content(self, i: int, value: int | None) -> str:
        agent, kind, op = PLAN[i]
        if kind == "tool":
            return f"recorded value = {value}"
        return f"I apply {op[0]}{op[1]} to the running value: value = {value}"

    def steps(self, forced: Intervention | None = None) -> tuple[list[Step], int | None, int, int]:
        """Steps, final value, live calls, replayed calls."""
        value: int | None = START
        steps: list[Step] = []
        live = replayed = 0
        for i, (agent, kind, op) in enumerate(PLAN):
            if forced is not None and i == forced.step:
                m = VALUE.search(forced.new_content)
                value = int(m.group(1)) if m else None
                text = forced.new_content
            elif kind == "tool":
                text = self.content(i, value)
            else:
                if value is not None:
                    value = apply(op, value) + (100 if i in self.slips and (forced is None or i > forced.step) else 0)
                text = self.content(i, value)
                if forced is None or i < forced.step:
                    replayed += 1
                else:
                    live += 1
            steps.append(Step(index=i, agent=agent, kind=kind, content=text, call_ids=[f"c{i}"] if kind == "agent" else []))
        return steps, value, live, replayed

    def verdict(self, value: int | None) -> Verdict:
        ok = value == truth() and not self.impossible
        return Verdict(success=ok, score=float(ok), details={"expected": truth(), "got": value})

    def trajectory(self) -> Trajectory:
        steps, value, _, _ = self.steps()
        return Trajectory(framework="sim", benchmark="ledger", task_id="t1", question=f"Start at {START}, apply the plan.",
                          ground_truth=str(truth()), steps=steps, final_answer=str(value), verdict=self.verdict(value))

    def replay(self, intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        self.replays.append(intervention)
        steps, value, live, replayed = self.steps(intervention)
        verdict = self.verdict(value)
        run = Trajectory(framework="sim", benchmark="ledger", task_id="t1", question=f"Start at {START}, apply the plan.",
                         ground_truth=str(truth()), steps=steps, final_answer=str(value), verdict=verdict)
        return run, verdict, ReplayOutcome(cost=Usage(llm_calls=live, replayed_calls=replayed, prompt_tokens=10 * live))


def correct_value(i: int) -> int:
    """The value step i should hold when every step before it is right."""
    value = START
    for _agent, kind, op in PLAN[: i + 1]:
        if kind == "agent":
            value = apply(op, value)
    return value


def diag(step: int | str, agent: str | None = None, fix: str | None = None, **extra: Any) -> str:
    body = {"mistake_step": step, "mistake_agent": agent or PLAN[step][0], "reason": f"wrong value at {step}",
            "suggested_fix": fix if fix is not None else f"I recompute carefully: value = {correct_value(step)}"}
    body.update(extra)
    return json.dumps(body)


def decline() -> str:
    return json.dumps({"fix_needed": False, "reason": "the arithmetic is right"})


class Recorder:
    """A scripted model: `answer(prompt)` decides; every prompt is kept for assertions."""

    def __init__(self, name: str, answer):
        self.prompts: list[str] = []

        def fn(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
            prompt = messages[-1]["content"]
            self.prompts.append(prompt)
            return answer(prompt, len(self.prompts) - 1)

        register_script(name, fn)
        self.chat = Chat(f"scripted/{name}")


def at_step(prompt: str) -> int | None:
    m = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompt)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- counterfactual search


def test_error_at_step_3_is_fixed_and_labelled_verified():
    ledger = Ledger({3})
    run = ledger.trajectory()
    assert run.success is False
    analyzer = Recorder("cf-step3", lambda p, n: decline() if at_step(p) is not None else diag(3))

    result = find_decisive_step(run, run.verdict, None, analyzer.chat, ledger.replay, Budget())

    a = result.annotation
    assert (a.method, a.status, a.verified, a.step, a.agent) == ("counterfactual", "labelled", True, 3, "Checker")
    assert a.run_id == run.id and a.annotator == "scripted/cf-step3"
    assert a.evidence.fix == f"I recompute carefully: value = {correct_value(3)}"
    # the analyzer saw the ground truth and Omega's feedback, and was told not to leak the solution in the fix
    assert "CORRECT ANSWER" in analyzer.prompts[0] and str(truth()) in analyzer.prompts[0]
    assert '"got": ' in analyzer.prompts[0] and "do not solve the rest of the task" in analyzer.prompts[0]
    # earlier agent steps 0 and 1 were examined (tool step 2 never), judged correct: no replay spent
    assert [at_step(p) for p in analyzer.prompts[1:]] == [0, 1]
    assert result.declined and [d.step for d in result.declined] == [0, 1]
    replay, control = result.replays
    assert replay.purpose == "counterfactual" and replay.intervention.kind == "fix"
    assert (replay.success_before, replay.success_after, replay.flipped) == (False, True, True)
    assert (replay.cost.llm_calls, replay.cost.replayed_calls) == (3, 2)  # agent steps 4, 5, 6 live; 0, 1 from the recording
    # the control: step 3 forced as recorded, the rest live: the run still fails, so the flip is the fix's
    assert control.intervention.kind == "control" and control.intervention.new_content == run.steps[3].content
    assert (control.success_after, control.flipped, control.cost.llm_calls) == (False, False, 3)
    check = a.flip_check.model_dump()
    assert (check["flips"], check["trials"], check["control_flips"], check["control_trials"]) == (1, 1, 0, 1)
    assert check["controls_replayed"] == [control.id] and check["controls_proven_identical"] == 0
    assert a.earliest == "established" and a.metadata["untested_earlier"] == []
    assert result.fixed_run is not None and result.fixed_run.success and result.fixed_run.parent_run_id == run.id
    assert replay.result_run_id == result.fixed_run.id
    assert a.evidence.replay_ids == [replay.id, control.id] and a.proof_replay_id == replay.id
    assert a.cost.replays == 2 and a.cost.llm_calls == 3 + 3 + 3  # 3 analyzer calls + 3 live calls, the control's 3
    assert a.cost.tokens >= 30 and a.cost.seconds > 0


def test_later_correction_also_works_but_the_earliest_is_the_label():
    ledger = Ledger({3})
    run = ledger.trajectory()

    def answer(prompt: str, n: int) -> str:
        step = at_step(prompt)
        if step is None:
            return diag(5, fix=f"value = {correct_value(5)}")  # the analyzer blames the symptom, step 5
        if step == 1:  # a superfluous "fix" that changes nothing of substance
            return diag(1, fix=f"Let me restate: value = {correct_value(1)}", fix_needed=True)
        return diag(step, fix_needed=True) if step == 3 else decline()

    analyzer = Recorder("cf-earlier", answer)
    # correcting step 5 to the right value works too
    fix5 = Intervention(run_id=run.id, step=5, new_content=f"value = {correct_value(5)}")
    assert ledger.replay(fix5)[1].success

    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay,
                                budget=Budget())
    assert result.verified and (result.step, result.agent) == (3, "Checker")
    steps_tried = [a.diagnosis.step for a in result.attempts]
    sources = [a.diagnosis.source for a in result.attempts]
    assert steps_tried == [5, 1, 3] and sources == ["ranked", "earlier", "earlier"]
    assert [a.success for a in result.attempts] == [True, False, True]
    # fix 5 + its control, fix 1, fix 3 + its control
    assert [r.intervention.kind for r in result.replays] == ["fix", "control", "fix", "fix", "control"]
    assert result.annotation.evidence.replay_ids == [r.id for r in result.replays]
    assert result.annotation.proof_replay_id == result.replays[3].id
    assert result.fixed_run.steps[3].content == f"I recompute carefully: value = {correct_value(3)}"
    # the step-1 prompt is told what was tested already; step 4 (after 3) is never examined
    assert "CORRECTIONS ALREADY TESTED" not in analyzer.prompts[1]
    assert [at_step(p) for p in analyzer.prompts] == [None, 0, 1, 3]
    assert "- step 1 (Solver)" in analyzer.prompts[3] and "- step 5" not in analyzer.prompts[3]
    assert 4 not in [at_step(p) for p in analyzer.prompts]


def test_unresolvable_failure_is_stored_unresolved_with_its_attempts():
    ledger = Ledger({3}, impossible=True)
    run = ledger.trajectory()
    ranked = iter([diag(3), diag(5, fix="value = 91"), diag(6, fix="value = 92")])

    def answer(prompt: str, n: int) -> str:
        step = at_step(prompt)
        return next(ranked) if step is None else diag(step, fix=f"value = {correct_value(step)} (rechecked)", fix_needed=True)

    analyzer = Recorder("cf-impossible", answer)
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(max_replays=10))

    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step) == ("unresolved", False, None, None)
    # 3 ranked diagnoses, then the untried agent steps 0, 1, 4 from the start, then the joint fix of every
    # step whose fix failed (the impossible task: it fails too)
    assert [x.diagnosis.step for x in result.attempts] == [3, 5, 6, 0, 1, 4, 0]
    assert [a.repeated for a in result.attempts[:6]] == [False, False, False, True, True, False]
    assert result.attempts[-1].steps == [0, 1, 3, 4, 5, 6] and result.attempts[-1].replay.success_after is False
    assert [x.step for x in result.replays[-1].intervention.also] == [1, 3, 4, 5, 6]
    assert all(r.success_after is False for r in result.replays)
    assert a.evidence.replay_ids == [r.id for r in result.replays]
    # each ranked fix had its step's control replayed beside it (`early_controls`): none was needed, all are kept
    controls = [r for r in result.replays if r.intervention.kind == "control"]
    assert [r.intervention.step for r in controls] == [3, 5, 6]
    assert [r.intervention.kind for r in result.replays[:6]] == ["fix", "control"] * 3  # each beside its fix
    assert sum("still failed" in note for note in a.evidence.notes) == 7 + 3
    assert sum("control replayed beside a fix that did not flip (still failed)" in n for n in a.evidence.notes) == 3
    assert a.cost.replays == 10 and result.fixed_run is None
    assert a.search_stats.replays == 7 and a.search_stats.control_replays == 3
    # previously failed diagnoses are fed back to the analyzer
    assert "DIAGNOSES ALREADY TESTED" not in analyzer.prompts[0]
    assert "- step 3 (Checker)" in analyzer.prompts[1] and "still failed" in analyzer.prompts[1]
    assert "- step 5 (Solver)" in analyzer.prompts[2]
    # ... with what the replay ended with: its final answer and the verifier's details
    first = result.attempts[0]
    assert first.said and f"final answer: {json.dumps(ledger.replay(first.replay.intervention)[0].final_answer)}" in first.said
    assert f"still failed ({first.said})" in analyzer.prompts[1] and '"expected": ' in first.said
    # a fix after which the later agents repeated the run's own answer is shown as such
    assert "later agents repeating the run's original final answer" in analyzer.prompts[4]


@pytest.mark.parametrize(
    "bad,problem",
    [
        ("I think the Checker got it wrong at some point.", "no JSON object could be parsed"),
        ('{"mistake_step": "3", "mistake_agent": "Checker", "reason": "x", "suggested_fix": ', "no JSON object"),
        (diag(11, agent="Checker"), "step 11 does not exist: the run has steps 0..6"),
        (diag(3, agent="Planner"), "step 3 was taken by Checker, not by 'Planner'"),
        (diag(2, agent="calculator"), "step 2 is a tool step (by calculator), not an agent step"),
        (diag(3, fix="I apply -4 to the running value:   value = 110"), "is what step 3 already says"),
        (json.dumps({"mistake_step": 3, "mistake_agent": "Checker"}), "no 'suggested_fix' key"),
        (diag("three", agent="Checker", fix="value = 1"), "mistake_step must be an integer"),
    ],
)
def test_invalid_proposals_are_reasked_with_the_problem_stated(bad: str, problem: str):
    ledger = Ledger({3})
    run = ledger.trajectory()
    if "value = 110" in bad:  # the recorded step 3, up to whitespace
        assert run.steps[3].content == "I apply -4 to the running value: value = 110"
    answers = [bad, diag(3)]
    analyzer = Recorder("cf-invalid", lambda p, n: answers[n] if n < len(answers) else decline())

    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay)

    assert result.verified and result.step == 3
    assert "YOUR PREVIOUS ANSWER WAS REJECTED" not in analyzer.prompts[0]
    assert "YOUR PREVIOUS ANSWER WAS REJECTED" in analyzer.prompts[1]
    assert problem in analyzer.prompts[1], analyzer.prompts[1][-600:]
    assert bad in analyzer.prompts[1]  # the rejected answer is quoted back
    assert [x.problem is not None for x in result.asked[:2]] == [True, False]


def test_steps_after_the_turn_the_run_failed_at_are_never_candidates():
    """A multi-turn run whose verdict failed at user turn 0 (BFCL's checker checks each turn after it: no later call
    changes that turn's check): a proposal at a step of turn 1 is refused and re-asked, and neither the scan nor the
    budget reaches past turn 0."""
    from rootstep.annotation._propose import failure_horizon

    ledger = Ledger({3})
    run = ledger.trajectory()
    steps = [s.model_copy(update={"metadata": {"turn": 0 if s.index <= 3 else 1}}) for s in run.steps]
    run = run.model_copy(update={"steps": steps, "verdict": run.verdict.model_copy(update={
        "details": {**run.verdict.details, "turn": 0, "check": "state"}})})
    assert failure_horizon(run, run.verdict) == 4
    assert failure_horizon(run, Verdict(success=False, details={"turn": 1})) == len(run.steps)
    assert failure_horizon(ledger.trajectory(), run.verdict) == len(run.steps)  # steps that do not say their turn
    answers = [diag(5), diag(3)]
    analyzer = Recorder("cf-horizon", lambda p, n: answers[n] if n < len(answers) else decline())

    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay)

    assert result.verified and result.step == 3
    assert "step 5 is in user turn 1, after the turn at which the run failed" in analyzer.prompts[1]
    assert "agent steps: [0, 1, 3]" in analyzer.prompts[1]
    assert {i.step for i in ledger.replays} == {3}  # the fix and its control; nothing of turn 1 replayed
    assert [at_step(p) for p in analyzer.prompts[2:]] == [0, 1]  # the earlier scan: turn 0's steps only


def test_invalid_answers_until_the_reask_limit_end_the_proposal():
    ledger = Ledger({3})
    run = ledger.trajectory()
    analyzer = Recorder("cf-hopeless", lambda p, n: "no idea")
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay,
                                budget=Budget(max_reasks=1, max_llm_calls=4, max_open_steps=None))
    assert result.annotation.status == "unresolved" and not result.replays
    assert len(analyzer.prompts) == 4  # ranked: 1 + 1 re-ask; step 0: 1 + 1 re-ask; then the call budget is spent
    assert any("no valid answer after 1 re-ask" in n for n in result.notes)
    assert any("LLM-call budget of 4 spent" in n for n in result.notes)


def test_a_budget_stopped_scan_is_unproven_earliest_not_a_label():
    ledger = Ledger({3})
    run = ledger.trajectory()
    analyzer = Recorder("cf-budget", lambda p, n: diag(5, fix=f"value = {correct_value(5)}") if at_step(p) is None
                        else diag(at_step(p), fix="value = 1", fix_needed=True))
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(max_replays=2))
    a = result.annotation
    # the flip at step 5 is causal (its control failed), but steps 1, 3 and 4 were never tested
    assert (a.status, a.verified, a.step, a.agent) == ("unproven_earliest", False, 5, "Solver")
    assert a.metadata["untested_earlier"] == [1, 3, 4] and a.earliest == "unproven"
    assert [x.diagnosis.step for x in result.attempts] == [5, 0]
    assert any("earlier scan stopped before step 1: replay budget of 2 spent" in n for n in result.notes)
    assert any("earliest not established: agent step(s) [1, 3, 4]" in n for n in a.evidence.notes)


def test_the_scan_stops_at_a_step_it_leaves_open_since_no_later_flip_could_be_a_label():
    """Step 1's fixes are all refused (the analyzer never writes a valid one) and it is not judged correct: a label
    needs every earlier agent step tried or cleared, so the flip the ranked phase found at step 5 cannot be one, nor
    could a flip at step 3 or 4. The scan stops there (`max_open_steps`), says so, and spends nothing more; with
    no such limit it asks on and replays the fix of step 3, which flips and is still not a label."""
    ledger = Ledger({3})
    run = ledger.trajectory()

    def answer(prompt: str, n: int) -> str:
        step = at_step(prompt)
        if step is None:
            return diag(5, fix=f"value = {correct_value(5)}")
        return decline() if step == 0 else "no idea" if step == 1 else diag(step, fix_needed=True)

    analyzer = Recorder("cf-open-step", answer)
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(max_reasks=1))
    a = result.annotation
    assert (a.status, a.verified, a.step) == ("unproven_earliest", False, 5)
    assert [at_step(p) for p in analyzer.prompts] == [None, 0, 1, 1]  # step 1 asked and re-asked, then no more
    assert [x.diagnosis.step for x in result.attempts] == [5]
    stats = a.search_stats.model_dump()
    assert stats["cut_by"] == "open_steps" and stats["cut_stopped"] == "the earlier scan after step 1"
    assert "step 1 left open" in stats["cut_reason"] and "no later flip could be a label" in stats["cut_reason"]
    assert a.metadata["untested_earlier"] == [1, 3, 4]

    analyzer = Recorder("cf-open-step-scan-on", answer)
    on = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay,
                            budget=Budget(max_reasks=1, max_open_steps=None))
    assert [x.diagnosis.step for x in on.attempts] == [5, 3] and on.attempts[1].success
    assert (on.annotation.status, on.annotation.step) == ("unproven_earliest", 3)  # step 1 is still open
    assert on.annotation.search_stats.cut_by is None and len(on.replays) > len(result.replays)


def test_no_joint_fix_is_tried_behind_a_step_left_open():
    """Fixes of steps 3 to 6 each failed; step 0 was left open before them, so their joint fix could not be a
    label either and is not replayed."""
    ledger = Ledger({3}, impossible=True)
    run = ledger.trajectory()

    def answer(prompt: str, n: int) -> str:
        step = at_step(prompt)
        if step is None:
            return diag(5)
        return "no idea" if step == 0 else decline() if step == 1 else diag(step, fix_needed=True)

    result = find_decisive_step(run, analyzer=Recorder("cf-open-joint", answer).chat, replay=ledger.replay,
                                budget=Budget(max_reasks=0, max_open_steps=2))
    assert [x.diagnosis.step for x in result.attempts] == [5, 3, 4, 6]  # no joint attempt after them
    assert result.annotation.status == "unresolved"
    assert any("joint fix of steps [3, 4, 5, 6] not tried: steps [0] before them were left open" in n
               for n in result.notes)


def test_the_default_budget_is_what_the_run_needs_and_establishes_the_earliest():
    ledger = Ledger({3})
    run = ledger.trajectory()
    analyzer = Recorder("cf-auto-budget", lambda p, n: diag(5, fix=f"value = {correct_value(5)}") if at_step(p) is None
                        else diag(at_step(p), fix=f"value = {correct_value(at_step(p)) + 1000}", fix_needed=True)
                        if at_step(p) != 3 else diag(3, fix_needed=True))
    assert Budget().for_run(6).max_replays == 3 + 6 + 1
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay)
    a = result.annotation
    assert (a.status, a.verified, a.step) == ("labelled", True, 3)
    # the fixes the analyzer wrote for steps 0 and 1 failed, so their joint fix is tried too (and fails):
    # the label stays on step 3, established by the scan
    assert [x.diagnosis.step for x in result.attempts] == [5, 0, 1, 3, 0]
    assert result.attempts[-1].steps == [0, 1] and result.attempts[-1].replay.success_after is False
    assert a.earliest == "established"


def test_live_call_budget_stops_the_search():
    ledger = Ledger({3}, impossible=True)
    run = ledger.trajectory()
    analyzer = Recorder("cf-live", lambda p, n: diag(at_step(p) or 0, fix=f"value = {n + 1000}", fix_needed=True))
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=ledger.replay, budget=Budget(max_live_calls=5))
    assert result.annotation.status == "unresolved"
    assert sum(r.cost.llm_calls for r in result.replays) >= 5
    assert any("live-call budget of 5 spent" in n for n in result.notes)


def crashing_once(replay, error: Exception):
    """`replay` whose first call raises `error` (the sandbox failed), the later ones replay."""
    first = [True]

    def replay_or_crash(intervention: Intervention):
        if first:
            first.clear()
            raise error
        return replay(intervention)
    return replay_or_crash


def diverging_once(replay):
    """`replay` whose first replay reports a divergence from the recording, the later ones do not."""
    first = [True]

    def replay_or_diverge(intervention: Intervention):
        traj, verdict, outcome = replay(intervention)
        if first:
            first.clear()
            return traj, verdict, outcome.model_copy(update={"divergence": "--- recorded\n+++ replayed"})
        return traj, verdict, outcome
    return replay_or_diverge


def test_replays_that_raise_or_diverge_decide_nothing():
    ledger = Ledger({3})
    run = ledger.trajectory()
    flaky = crashing_once(diverging_once(ledger.replay), RuntimeError("sandbox died"))
    answers = iter([diag(3), diag(3, fix=f"value = {correct_value(3)}"), diag(3, fix=f"so value = {correct_value(3)}")])
    analyzer = Recorder("cf-flaky", lambda p, n: decline() if at_step(p) is not None else next(answers))
    # the order of the replay calls is the subject: no control beside the fixes (`early_controls`)
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=flaky, early_controls=False)
    first, second, third, control = result.replays
    assert control.intervention.kind == "control" and control.success_after is False
    assert first.error == "RuntimeError: sandbox died" and first.success_after is None and first.result_run_id is None
    assert second.divergence and second.success_after is None
    assert third.success_after is True and result.verified and result.step == 3
    assert "the replay could not run (infrastructure error" in analyzer.prompts[1]
    assert "RuntimeError: sandbox died" in analyzer.prompts[1]
    assert "replay diverged from the recording" in analyzer.prompts[2]


def test_a_fix_whose_replay_crashed_may_be_proposed_again():
    """Seen in the hand-model slice: a replay's container vanished (infrastructure), the analyzer re-proposed
    the same fix, and it must be replayed, not rejected as 'already tested'."""
    ledger = Ledger({3})
    run = ledger.trajectory()
    crash_once = crashing_once(ledger.replay, RuntimeError("No such container"))
    analyzer = Recorder("cf-crash-same", lambda p, n: decline() if at_step(p) is not None else diag(3))
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=crash_once, early_controls=False)  # call order
    assert [r.intervention.new_content for r in result.replays[:2]] == [result.replays[0].intervention.new_content] * 2
    assert result.replays[2].intervention.kind == "control"
    assert result.verified and result.step == 3 and "already tested" not in " ".join(analyzer.prompts)


def test_a_ranked_fix_has_its_control_replayed_beside_it_and_a_later_flip_at_the_step_uses_it():
    """`early_controls`: the control of a ranked fix's step runs in another thread while the fix replays; when the
    fix flips, its proof is ready (no replay waited for after it); when it does not, the control is kept and a
    later flip at the same step uses it instead of replaying another. The earlier-steps scan runs none."""
    import threading
    import time

    ledger = Ledger({3})
    run = ledger.trajectory()
    inflight, most = [0], [0]
    lock = threading.Lock()

    def slow_replay(intervention):
        with lock:
            inflight[0] += 1
            most[0] = max(most[0], inflight[0])
        time.sleep(0.2)
        try:
            return ledger.replay(intervention)
        finally:
            with lock:
                inflight[0] -= 1

    answers = iter([diag(3, fix="value = 1"), diag(3)])  # a wrong fix of step 3, then the right one
    analyzer = Recorder("cf-early", lambda p, n: decline() if at_step(p) is not None else next(answers))
    result = find_decisive_step(run, analyzer=analyzer.chat, replay=slow_replay)
    assert result.verified and result.step == 3 and most[0] == 2  # fix and control replayed at the same time
    kinds = [(r.intervention.kind, r.intervention.step) for r in result.replays]
    assert kinds == [("fix", 3), ("control", 3), ("fix", 3)]  # one control for both fixes of step 3
    check = result.attempts[1].check
    assert check is not None and [c.id for c in check.controls] == [result.replays[1].id] and check.causal
    assert result.attempts[0].beside == [result.replays[1]] and result.attempts[1].beside == []
    assert [i.kind for i in ledger.replays].count("control") == 1
    assert not any("beside a fix that did not flip" in n for n in result.annotation.evidence.notes)  # it was used


def test_search_refuses_a_success():
    run = Ledger(set()).trajectory()
    analyzer = Recorder("cf-success", lambda p, n: diag(3))
    with pytest.raises(ValueError, match="succeeded"):
        find_decisive_step(run, analyzer=analyzer.chat, replay=Ledger(set()).replay)


def test_sequential_scan_finds_the_same_label_with_more_replays():
    ledger = Ledger({3})
    run = ledger.trajectory()
    analyzer = Recorder("cf-seq", lambda p, n: diag(at_step(p), fix=f"Rechecked: value = {correct_value(at_step(p))}"))
    result = sequential_scan(run, analyzer=analyzer.chat, replay=ledger.replay)
    assert result.verified and result.step == 3
    assert [x.diagnosis.step for x in result.attempts] == [0, 1, 3]  # every agent step from 0; tool step skipped
    assert result.annotation.metadata["search"] == "sequential"
    assert "If the step is correct" not in analyzer.prompts[0]  # the naive scan may not decline


# --------------------------------------------------------------------------- fault injection


def corrupt(step: int, value: int, description: str) -> str:
    return json.dumps({"step": step, "corrupted_content": f"I apply it: value = {value}", "description": description})


def test_injection_that_flips_a_success_is_labelled_by_construction():
    ledger = Ledger(set())
    run = ledger.trajectory()
    assert run.success
    perturber = Recorder("inj-flip", lambda p, n: corrupt(3, correct_value(3) + 7, "added 7 to the subtraction result"))

    result = inject_fault(run, perturber.chat, ledger.replay, Budget(), mode="one_shot")

    a = result.annotation
    assert result.flipped and a is not None
    assert (a.method, a.verified, a.agent, a.step, a.status) == ("fault_injection", True, "Checker", 3, "labelled")
    assert a.evidence.corruption == f"I apply it: value = {correct_value(3) + 7}"
    assert a.evidence.reason == "added 7 to the subtraction result"
    assert result.failed_run is not None and a.run_id == result.failed_run.id != run.id
    assert result.failed_run.parent_run_id == run.id and result.failed_run.success is False
    replay, control = result.replays
    assert replay.purpose == "fault_injection" and replay.intervention.kind == "corruption"
    assert (replay.success_before, replay.success_after) == (True, False)
    # the control (step 3 unchanged) still succeeds: the failure is the corruption's
    assert control.intervention.kind == "control" and control.success_after is True
    assert a.flip_check.control_trials == 1 and a.flip_check.control_flips == 0
    assert a.metadata["source_run_id"] == run.id and a.annotator == "scripted/inj-flip"
    assert a.cost.replays == 2 and a.cost.llm_calls == 1 + replay.cost.llm_calls + control.cost.llm_calls
    assert "SUCCEEDED" in perturber.prompts[0] and "SPECIFIC" in perturber.prompts[0]


def test_injection_tries_the_next_candidate_when_the_first_does_not_flip():
    ledger = Ledger(set())
    run = ledger.trajectory()
    answers = [corrupt(1, correct_value(1), "restated the value in other words"),
               corrupt(4, correct_value(4) - 1, "off by one in the addition")]
    perturber = Recorder("inj-second", lambda p, n: answers[n])

    result = inject_fault(run, perturber.chat, ledger.replay, Budget(), programmatic=False, mode="one_shot")

    assert [x.confirmed for x in result.attempts] == [False, True]
    assert result.annotation.step == 4 and result.annotation.agent == "Planner"
    assert "CORRUPTIONS ALREADY TESTED" in perturber.prompts[1] and "restated the value" in perturber.prompts[1]
    assert "run still succeeded" in result.annotation.evidence.notes[0]


def test_injection_reasks_an_invalid_perturber_answer():
    ledger = Ledger(set())
    run = ledger.trajectory()
    answers = [json.dumps({"step": 2, "corrupted_content": "recorded value = 0", "description": "zeroed the tool"}),
               corrupt(5, 1, "multiplied wrongly")]
    perturber = Recorder("inj-invalid", lambda p, n: answers[n])
    result = inject_fault(run, perturber.chat, ledger.replay, programmatic=False, mode="one_shot")
    assert result.annotation.step == 5
    assert "step 2 is a tool step (by calculator), not an agent step; only agent steps can be corrupted" in perturber.prompts[1]


def test_injection_falls_back_to_programmatic_perturbations_and_respects_the_budget():
    ledger = Ledger(set())
    run = ledger.trajectory()
    # the perturber only proposes harmless restatements; the programmatic candidates flip the run
    perturber = Recorder("inj-weak", lambda p, n: corrupt(0, correct_value(0), f"restatement {n}"))
    result = inject_fault(run, perturber.chat, ledger.replay, Budget(max_candidates=2, max_replays=6), seed=3,
                          mode="one_shot")
    sources = [x.corruption.source for x in result.attempts]
    assert sources[:1] == ["perturber"]
    assert result.flipped and result.annotation.annotator.startswith("programmatic:")
    assert result.attempts[-1].corruption.source == "programmatic"
    assert len(result.replays) <= 6

    # nothing flips within 2 replays: no label, the attempts and cost are still reported
    resistant = Ledger(set())
    result = inject_fault(run, None, lambda i: (lambda t: (t[0], Verdict(success=True), t[2]))(resistant.replay(i)),
                          Budget(max_replays=2))
    assert result.annotation is None and len(result.replays) == 2 and result.cost.replays == 2
    assert any("replay budget of 2 spent" in n for n in result.notes)


def test_injection_with_programmatic_perturbations_only_is_deterministic():
    run = Ledger(set()).trajectory()
    one = inject_fault(run, None, Ledger(set()).replay, seed=7)
    two = inject_fault(run, None, Ledger(set()).replay, seed=7)
    assert one.flipped and one.annotation.id == two.annotation.id
    assert [a.corruption.description for a in one.attempts] == [a.corruption.description for a in two.attempts]


def test_injection_refuses_a_failure():
    run = Ledger({3}).trajectory()
    with pytest.raises(ValueError, match="failed"):
        inject_fault(run, None, Ledger({3}).replay)


# --------------------------------------------------------------------------- programmatic perturbations

CODE = """Here is my solution:
```python
def total(xs):
    result = 0
    for x in xs:
        if x > 0:
            result = result + x
    return result
```
It sums the positive numbers."""


def step_of(content: str, tool_calls: list[dict[str, Any]] | None = None) -> Step:
    return Step(index=2, agent="Coder", content=content, tool_calls=tool_calls or [])


def test_drop_code_line_removes_one_statement_inside_the_code_block():
    p = drop_code_line(step_of(CODE), random.Random(0))
    assert p is not None and p.name == "drop_code_line" and (p.step, p.agent) == (2, "Coder")
    before, after = CODE.splitlines(), p.content.splitlines()
    assert len(after) == len(before) - 1
    dropped = [line for line in before if line not in after]
    assert len(dropped) == 1 and dropped[0].strip() in p.description
    assert after[0] == "Here is my solution:" and after[-1] == "It sums the positive numbers."
    assert drop_code_line(step_of("no code here, value = 3"), random.Random(0)) is None
    assert drop_code_line(step_of("```\nprint(1)\n```"), random.Random(0)) is None  # only one line



def test_drop_code_line_never_leaves_code_that_does_not_compile():
    """The AG2 coder's real step on MBPP 66 (Qwen2.5-Coder-0.5B, this slice): dropping `for number in
    numbers:` left an IndentationError (a label any run shows); now only a statement whose removal keeps
    the code compiling is dropped (removing `positive_count += 1` would leave the `if` without a body)."""
    import ast

    real = ("```python\ndef pos_count(numbers):\n    # Initialize a counter for positive numbers\n    positive_count = 0\n"
            "    # Iterate through each number in the list\n    for number in numbers:\n"
            "        # Check if the number is positive\n        if number > 0:\n"
            "            # Increment the counter if the number is positive\n            positive_count += 1\n"
            "    # Return the total count of positive numbers\n    return positive_count\n```")
    dropped = set()
    for seed in range(30):
        p = drop_code_line(step_of(real), random.Random(seed))
        assert p is not None
        ast.parse(p.content.split("```python\n")[1].split("```")[0])
        dropped.add(p.description)
    assert dropped == {"dropped the line `positive_count = 0` from the code",
                       "dropped the line `return positive_count` from the code"}


def test_change_constant_changes_one_number_and_prefers_code():
    p = change_constant(step_of(CODE), random.Random(1))
    assert p is not None and "result = 0" not in p.content
    assert "changed the constant 0 to" in p.description
    prose = change_constant(step_of("The answer is value = 42 apples"), random.Random(0))
    assert prose is not None and re.search(r"value = (\d+)", prose.content).group(1) != "42"
    decimal = change_constant(step_of("rate = 0.25"), random.Random(0))
    assert decimal is not None and re.fullmatch(r"rate = \d\.\d\d", decimal.content) and decimal.content != "rate = 0.25"
    assert change_constant(step_of("no digits at all"), random.Random(0)) is None


def test_flip_operator_flips_a_comparison_or_arithmetic_operator():
    seen = set()
    for seed in range(20):
        p = flip_operator(step_of(CODE), random.Random(seed))
        assert p is not None
        seen.add(p.description.split("`")[1] + "->" + p.description.split("`")[3])
    assert seen == {">->" + "<=", "+->-"}
    assert flip_operator(step_of("def f(x) -> int: return x"), random.Random(0)) is None  # an arrow is not `>`
    p = flip_operator(step_of("so 6 * 7 is what we need"), random.Random(0))
    assert p is not None and p.content == "so 6 / 7 is what we need"
    assert flip_operator(step_of("x**2 and a+=1"), random.Random(0)) is None
    # markdown bullets and quotes are not operators
    assert flip_operator(step_of("Findings:\n- the count is 4\n* the sum is 9\n> quoted text"), random.Random(0)) is None
    p = flip_operator(step_of("- check whether n<10 holds"), random.Random(0))
    assert p is not None and p.content == "- check whether n>=10 holds"


def test_alter_tool_argument_swaps_or_changes_an_argument_in_both_tool_call_forms():
    openai_form = [{"id": "c1", "type": "function",
                    "function": {"name": "search", "arguments": json.dumps({"query": "capital of France", "page": 2})}}]
    outcomes = set()
    for seed in range(10):
        p = alter_tool_argument(step_of("calling search", openai_form), random.Random(seed))
        assert p is not None and p.content == "calling search" and p.tool_calls is not None
        args = json.loads(p.tool_calls[0]["function"]["arguments"])
        assert args != {"query": "capital of France", "page": 2} and p.tool_calls[0]["id"] == "c1"
        outcomes.add("query" if args["query"] != "capital of France" else "page")
    assert outcomes == {"query", "page"}
    plain = [{"name": "move", "arguments": {"src": "a.txt", "dst": "b.txt"}}]
    swaps = [alter_tool_argument(step_of("", plain), random.Random(s)) for s in range(10)]
    assert any(p.tool_calls[0]["arguments"] == {"src": "b.txt", "dst": "a.txt"} and "swapped" in p.description for p in swaps)
    assert alter_tool_argument(step_of("no tools"), random.Random(0)) is None


def test_drop_and_repeat_tool_call_remove_or_double_one_call():
    calls = [{"id": "c1", "type": "function", "function": {"name": "cd", "arguments": json.dumps({"folder": "doc"})}},
             {"id": "c2", "type": "function", "function": {"name": "mkdir", "arguments": json.dumps({"dir_name": "t"})}}]
    dropped = {drop_tool_call(step_of("", calls), random.Random(seed)).description for seed in range(10)}
    assert dropped == {"dropped the call to cd (call 1 of 2)", "dropped the call to mkdir (call 2 of 2)"}
    only = drop_tool_call(step_of("", calls[:1]), random.Random(0))
    assert only.tool_calls == [] and only.content == "Done."  # a call-only step that made none says something
    assert drop_tool_call(step_of("Moving it now.", calls[:1]), random.Random(0)).content == "Moving it now."
    twice = repeat_tool_call(step_of("", calls), random.Random(1))
    names = [c["function"]["name"] for c in twice.tool_calls]
    assert len(names) == 3 and len({c["id"] for c in twice.tool_calls}) == 3 and twice.description.endswith("twice")
    assert names in (["cd", "cd", "mkdir"], ["cd", "mkdir", "mkdir"])
    plain = repeat_tool_call(step_of("", [{"name": "ls", "arguments": {}}]), random.Random(0))
    assert plain.tool_calls == [{"name": "ls", "arguments": {}}] * 2
    assert drop_tool_call(step_of("no tools"), random.Random(0)) is None
    assert repeat_tool_call(step_of("no tools"), random.Random(0)) is None


def test_truncate_message_cuts_at_a_word_boundary():
    text = "First we read the task carefully, then we compute the sum of all the even numbers and report it."
    p = truncate_message(step_of(text), random.Random(0))
    assert p is not None and text.startswith(p.content) and len(p.content) < len(text)
    words = len(p.content.split())
    assert 0.4 * 19 - 1 <= words <= 0.6 * 19 + 1 and not p.content.endswith(" ")
    assert truncate_message(step_of("too short to cut"), random.Random(0)) is None


def test_programmatic_perturbations_are_seeded_and_only_touch_agent_steps():
    steps = [Step(index=0, agent="Planner", content="We need 3 items and then 4 more items, so 3 + 4 in total."),
             Step(index=1, agent="python", kind="tool", content="```\nx = 1\ny = 2\n```"),
             Step(index=2, agent="Coder", content=CODE)]
    run = Trajectory(framework="sim", benchmark="ledger", task_id="p", steps=steps, verdict=Verdict(success=True))
    a = programmatic_perturbations(run, seed=5)
    assert a == programmatic_perturbations(run, seed=5)
    assert [p.description for p in a] != [p.description for p in programmatic_perturbations(run, seed=6)]
    assert {p.step for p in a} == {0, 2}
    assert {p.name for p in a} == {"drop_code_line", "change_constant", "flip_operator", "truncate_message"}
    only = programmatic_perturbations(run, seed=5, names=["flip_operator"], steps=[0])
    assert [(p.name, p.step) for p in only] == [("flip_operator", 0)]
    with pytest.raises(ValueError, match="unknown perturbations"):
        programmatic_perturbations(run, names=["delete_everything"])


# --------------------------------------------------------------------------- the adapter bridge


def test_adapter_replay_reads_the_gateway_counts_and_flags_a_changed_prefix():
    from rootstep.flows import adapter_replay

    ledger = Ledger({3})
    run = ledger.trajectory()

    class FakeAdapter:  # what `Adapter.replay` returns: the new run with its `replay` provenance
        def __init__(self, prefix_identical: bool):
            self.prefix_identical = prefix_identical
            self.calls: list[tuple[Trajectory, Intervention]] = []

        def replay(self, trajectory: Trajectory, intervention: Intervention, **kwargs: Any) -> Trajectory:
            self.calls.append((trajectory, intervention))
            result, verdict, outcome = ledger.replay(intervention)
            return result.model_copy(update={"prompt_tokens": 40, "completion_tokens": 2, "replay": ReplayProvenance(
                of_gateway_run_id="ledger", live_calls=outcome.cost.llm_calls, replayed_calls=outcome.cost.replayed_calls,
                divergence=None, prefix_identical=self.prefix_identical)})

    fix = Intervention(run_id=run.id, step=3, new_content=f"value = {correct_value(3)}")
    good = FakeAdapter(True)
    result, verdict, outcome = adapter_replay(good, run)(fix)
    assert good.calls[0] == (run, fix) and verdict.success
    assert (outcome.cost.llm_calls, outcome.cost.replayed_calls, outcome.cost.tokens, outcome.divergence) == (3, 2, 42, None)
    _, _, outcome = adapter_replay(FakeAdapter(False), run)(fix)
    assert outcome.divergence == "the steps before step 3 differ from the recorded run"
    analyzer = Recorder("cf-adapter", lambda p, n: decline() if at_step(p) is not None else diag(3))
    found = find_decisive_step(run, analyzer=analyzer.chat, replay=adapter_replay(FakeAdapter(True), run))
    assert found.verified and found.step == 3 and found.replays[0].cost.tokens == 42


def test_adapter_replay_retries_an_infrastructure_failure_once_then_reports_it():
    from rootstep.adapters.base import AdapterError
    from rootstep.flows import adapter_replay
    from rootstep.annotation._trial import try_intervention
    from rootstep.annotation._budget import Meter

    ledger = Ledger({3})
    run = ledger.trajectory()
    fix = Intervention(run_id=run.id, step=3, new_content=f"value = {correct_value(3)}")

    class FlakyAdapter:  # the container dies `failures` times, then the replay works
        def __init__(self, failures: int):
            self.failures, self.attempts = failures, 0

        def replay(self, trajectory: Trajectory, intervention: Intervention, **kwargs: Any) -> Trajectory:
            self.attempts += 1
            if self.attempts <= self.failures:
                raise AdapterError("ag2 episode x: the sandbox failed: NotFound: 404 container gone")
            result, _, outcome = ledger.replay(intervention)
            return result.model_copy(update={"metadata": {"replay": {
                "live_calls": outcome.cost.llm_calls, "replayed_calls": outcome.cost.replayed_calls, "prefix_identical": True}}})

    once = FlakyAdapter(1)
    _, verdict, outcome = adapter_replay(once, run)(fix)
    assert once.attempts == 2 and verdict.success and outcome.error is None
    twice = FlakyAdapter(2)
    with pytest.raises(AdapterError, match="404 container gone"):
        adapter_replay(twice, run)(fix)
    assert twice.attempts == 2
    # in the search, a replay that still fails is an attempt with an error that decides nothing
    row, result, verdict = try_intervention(run, fix, adapter_replay(FlakyAdapter(5), run, retries=0),
                                            Meter(Budget()), "counterfactual")
    assert result is None and verdict is None and row.success_after is None and "404" in row.error
    no_retry = FlakyAdapter(1)
    with pytest.raises(AdapterError):
        adapter_replay(no_retry, run, retries=0)(fix)
    assert no_retry.attempts == 1


def test_annotation_bench_runs_end_to_end_through_the_gateway():
    """bench/annotation.py on a tiny corpus: real gateway record/replay over HTTP, both searches agree."""
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parent.parent / "bench" / "annotation.py"
    out = subprocess.run(
        [sys.executable, str(bench), "--runs", "2", "--throughput-runs", "2", "--agent-steps", "5",
         "--agent-latency", "0", "--analyzer-latency", "0"],
        capture_output=True, text=True, timeout=600,  # a busy machine: 120 s ran out beside a slice
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("SIMULATION:")
    assert "verified labels" in out.stdout and "2/2" in out.stdout
    assert "same labels from (a), (b) and (b) at every concurrency: yes" in out.stdout
    assert re.search(r"labels equal to the known decisive step\s+2\s+2", out.stdout)
