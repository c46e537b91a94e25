"""Once a control of a search has flipped (the team re-rolls), every later flip of the search needs three controls.

The run is real (tests/fixtures/real_runs/ag2_gsm8k_test-1101.json: AG2 on GSM8K, the agents on the 0.5B); the
replays are scripted as the flaky AG2 team of tests/test_causal_labels_flows.py behaves (sampled at temperature
0.7: its coder answers right on a later live call whatever it is told), with the control of a later step failing.
"""

from __future__ import annotations

import json
from pathlib import Path

from rootstep.annotation import Budget, Meter, ReplayOutcome
from rootstep.annotation._propose import Diagnosis
from rootstep.annotation._trial import REROLLED_CONTROLS, FixTrial
from rootstep.benchmarks import verify
from rootstep.model import Intervention, Step, Task, Trajectory, Usage, Verdict

REAL = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-1101.json").read_text())
TASK = Task.model_validate(REAL["task"])


def _run() -> Trajectory:
    final = REAL["final_answer"] + "\n\nProgram output:\n28.0"
    return Trajectory(framework="ag2", benchmark="gsm8k", task_id=TASK.task_id, question=TASK.prompt,
                      ground_truth=TASK.ground_truth, steps=[Step.model_validate(s) for s in REAL["steps"]],
                      final_answer=final, verdict=verify(TASK, final), recording={"gateway_run_id": "real", "task": TASK})


def _trial(run: Trajectory, control_flips_at: set[int], replayed: list[Intervention],
           fix_fails_at: set[int] = frozenset(), early_controls: bool = False) -> FixTrial:
    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replayed.append(i)
        right = i.step in control_flips_at if i.kind == "control" else i.step not in fix_fails_at
        answer = "The number of miles Ahito ran is 16.\n\nAnswer: 16" if right else run.final_answer
        return run.model_copy(update={"final_answer": answer}), verify(TASK, answer), ReplayOutcome(cost=Usage(llm_calls=1))

    return FixTrial(run, False, TASK, lambda t, a: verify(t, a), None, replay, Meter(Budget()),
                    early_controls=early_controls)


def _fix(run: Trajectory, step: int) -> Diagnosis:
    return Diagnosis(step=step, agent=run.steps[step].agent, fix=f"Let me recompute: 36 - 20 = 16.\n\nAnswer: 16 (step {step})")


def test_after_a_control_that_flipped_a_later_flip_is_put_to_three_controls():
    run = _run()
    replayed: list[Intervention] = []
    trial = _trial(run, {1}, replayed)
    first, _ = trial.attempt(_fix(run, 1))
    assert first.turned and not first.confirmed and "control replays (the step unchanged) flipped" in first.not_causal
    assert trial.rerolled and [i.kind for i in replayed] == ["fix", "control"]
    replayed.clear()
    later, _ = trial.attempt(_fix(run, 6))
    assert later.confirmed and len(later.check.controls) == REROLLED_CONTROLS == 3
    assert [i.kind for i in replayed] == ["fix", "control", "control", "control"] and {i.step for i in replayed} == {6}


def test_a_control_that_flipped_beside_a_fix_that_did_not_counts_too():
    """The ranked phase replays a step's control beside its fix (`_beside`): when the fix fails and the control
    succeeds, the team re-rolls all the same, and the next flip needs three controls."""
    run = _run()
    replayed: list[Intervention] = []
    trial = _trial(run, {1}, replayed, fix_fails_at={1}, early_controls=True)
    first, _ = trial.attempt(_fix(run, 1), early_control=True)
    assert not first.turned and [r.success_after for r in first.beside] == [True]
    assert trial.rerolled and sorted(i.kind for i in replayed) == ["control", "fix"]
    replayed.clear()
    later, _ = trial.attempt(_fix(run, 6))
    assert later.confirmed and len(later.check.controls) == REROLLED_CONTROLS
    assert [i.kind for i in replayed] == ["fix", "control", "control", "control"]


def test_a_search_whose_controls_all_failed_keeps_one_control_per_flip():
    run = _run()
    replayed: list[Intervention] = []
    trial = _trial(run, set(), replayed)
    first, _ = trial.attempt(_fix(run, 1))
    second, _ = trial.attempt(_fix(run, 6))
    assert first.confirmed and second.confirmed and not trial.rerolled
    assert [i.kind for i in replayed] == ["fix", "control", "fix", "control"]


def test_no_controls_asked_stays_no_controls():
    """`--controls 0` is the user's choice: a re-rolling team does not bring controls back."""
    run = _run()
    replayed: list[Intervention] = []
    trial = _trial(run, {1}, replayed)
    trial.controls = 0
    trial.rerolled = True
    attempt, _ = trial.attempt(_fix(run, 6))
    assert attempt.turned and attempt.check.controls == [] and [i.kind for i in replayed] == ["fix"]
