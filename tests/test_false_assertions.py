"""An assertion false on its face (`assert 3 + 1/3 == 7/3`) is not a correct test and not a correction
(`benchmarks.false_assertion`, checked in `FixProposer.fix_problem` and by the scan).

The run is real (tests/fixtures/real_runs/metagpt_math500_algebra_251.json: MetaGPT on MATH-500 algebra/251, the
agents on the 0.5B, seed-43 slice of 2026-12-03). The tester's step 2 asserts `7 / (1 + 1/3) == 7 / 4`; the 1.5B's
fix of it, `assert 3 + 1/3 == 7/3`, is false too, yet its replay wandered to the right answer (2) and the search
labelled tester@2 with it. The literals are read from the syntax tree; nothing runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, Meter, TaskContext
from rootstep.annotation._propose import FixProposer
from rootstep.benchmarks import false_assertion, verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Recording, Step, Task, Trajectory

FIXTURES = Path(__file__).parent / "fixtures" / "real_runs"
DATA = json.loads((FIXTURES / "metagpt_math500_algebra_251.json").read_text())
TASK = Task.model_validate(DATA["task"])
STEPS = [Step.model_validate(s) for s in DATA["steps"]]
FIX = json.loads(DATA["tester_fix_answer"])["suggested_fix"]


def test_the_testers_step_and_its_accepted_fix_are_both_false():
    assert false_assertion(STEPS[2].content) == "assert 7 / (1 + 1/3) == 7 / 4"
    assert false_assertion(FIX) == "assert 3 + 1/3 == 7/3"


@pytest.mark.parametrize("text", [
    "```python\nassert 3 + 1 / 2 == 7 / 2\n```",  # the replay's step 10, true
    "```python\nassert 0.1 + 0.2 == 0.3\n```",  # a decimal is the number it spells
    "```python\nassert 7/3 == 2.3333333333333335\n```",  # within 1e-9
    "```python\nassert simplify('1/5', '5/1') == True\n```",  # a call: not judged
    "```python\nassert 2 ** 1000 == 1\n```",  # too large a power: not judged
    "```python\nassert 1 / 0 == 1\n```",  # a division by zero: not judged
    "assert 1 == 2",  # no code block: not a program
])
def test_true_or_unjudged_assertions_are_left_alone(text):
    assert false_assertion(text) is None


def test_other_real_false_assertions_are_found():
    earlier = json.loads((FIXTURES / "metagpt_math500_algebra_2735.json").read_text())["steps"]
    assert false_assertion(earlier[14]["content"]) == "assert (4 + 6 * 1 - 1 - 3 * 1) / (5 - 4) == 1.0"
    assert false_assertion("<code>\nassert 1 / 3 + 1 / 3 == 7 / 3, 'x'\n</code>") == "assert 1 / 3 + 1 / 3 == 7 / 3"


def run() -> Trajectory:
    return Trajectory(framework="metagpt", benchmark="math500", task_id=TASK.task_id, question=TASK.prompt,
                      ground_truth=TASK.ground_truth, steps=STEPS, final_answer=DATA["final_answer"],
                      verdict=verify(TASK, DATA["final_answer"]), recording=Recording(gateway_run_id="real", task=TASK))


def proposer(trajectory: Trajectory, analyzer: Any) -> FixProposer:
    return FixProposer(trajectory, trajectory.verdict, TaskContext(question=TASK.prompt, ground_truth=TASK.ground_truth,
                       task=TASK), analyzer, Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a), None, None)


def test_the_false_fix_is_refused_before_its_replay():
    trajectory = run()
    problem = proposer(trajectory, lambda *a, **k: "").fix_problem(trajectory.steps[2], FIX)
    assert problem is not None and problem.startswith("false_assertion: the fix's `assert 3 + 1/3 == 7/3` is false")


def test_the_scan_asks_for_the_false_tests_correction_and_refuses_the_false_fix():
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        return DATA["tester_fix_answer"]  # the 1.5B's real answer, every time

    register_script("false-assertion", analyzer)
    trajectory = run()
    propose = proposer(trajectory, Chat("scripted/false-assertion"))
    diagnosis, why = propose.ask_at(trajectory.steps[2], [], set(), require_fix=False, source="sequential")
    assert diagnosis is None and why is not None and "false_assertion" in why
    assert "Write a corrected version of step 2" in prompts[0]  # asked for its correction, not whether it is correct
    assert any("step 2 (tester) asserts `assert 7 / (1 + 1/3) == 7 / 4`, which is false" in n for n in propose.notes)
