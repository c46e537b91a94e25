"""A fix that keeps the step's rejected answer is refused before its replay (`FixProposer.keeps_wrong_answer`); the
step it named, which states the answer again after the steps that stated it first were tried, gets the task's answer
in its place in the scan (`first_stated(passed=)`), where it used to be left open and stop the scan.

The run and the fixes are real: AG2 on GSM8K test-1101 (Ahito ran 16 miles) from the main job of 2026-11-29, the
agents on the 0.5B; the critic's step 6 boxes the team's 28, and the 1.5B analyzer's fix of steps 6, 7 and 9 was
the same sentence without the box (`The code output is correct. The number of miles Ahito ran is 28.`). That
search replayed all seven fixes (every one failed) and a joint fix: 958 s for no label."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.benchmarks import verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Intervention, Step, Task, Trajectory, Usage, Verdict

REAL = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-1101.json").read_text())
FIXES: dict[int, str] = {int(k): v for k, v in REAL["analyzer_fixes"].items()}


@pytest.fixture(scope="module")
def run() -> Trajectory:
    task = Task.model_validate(REAL["task"])
    steps = [Step.model_validate(s) for s in REAL["steps"]]
    final = REAL["final_answer"] + "\n\nProgram output:\n28.0"
    verdict = verify(task, final)
    assert not verdict.success and verdict.details.get("extracted") is not None
    return Trajectory(framework="ag2", benchmark="gsm8k", task_id=task.task_id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer=final, verdict=verdict,
                      recording={"gateway_run_id": "real", "task": task})


def diagnosis(step: int, agent: str) -> str:
    return json.dumps({"fix_needed": True, "mistake_step": step, "mistake_agent": agent, "reason": "the answer is wrong",
                       "suggested_fix": FIXES[step]})


def test_a_prose_fix_that_restates_the_rejected_answer_is_refused_and_the_step_gets_the_tasks_answer(run: Trajectory):
    assert "boxed{28}" in run.steps[6].content and FIXES[6].endswith("Ahito ran is 28.")
    prompts: list[str] = []

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        m = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompts[-1])
        step = 6 if m is None else int(m.group(1))  # the whole-run question: the analyzer blamed the critic
        return diagnosis(step, run.steps[step].agent)

    register_script("kept-wrong-answer", answer)
    replayed: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replayed.append(i)  # every one of these fixes failed in the real search
        assert run.verdict is not None
        return run, run.verdict, ReplayOutcome(cost=Usage(llm_calls=1))

    result = find_decisive_step(run, analyzer=Chat("scripted/kept-wrong-answer"), replay=replay,
                                budget=Budget(max_reasks=0), verify=lambda t, a: verify(t, a))
    fixes = [(i.step, i.kind) for i in replayed]
    # step 1, the first to state 28, gets the task's 16 first, with its control beside it (the grounded phase); the
    # ranked fix of step 6 keeps the 28 and is refused; then the scan: steps 3 and 4, fixes that change the answer
    # (all wrong, the replays fail); the critic's step 6 and the coder's step 7 box the 28 again after steps that
    # stated it were tried, so each gets the task's 16 in its place, no fix of the analyzer's asked for
    assert sorted(fixes[:2]) == [(1, "control"), (1, "fix")] and "\\boxed{16}" in replayed[fixes.index((1, "fix"))].new_content
    # (its last line, `... Ahito ran is 28.`, states 28: refused as a wrong answer; before `The number is 3.` was read as a
    # statement, as keeping step 6's answer)
    refusals = [n for n in result.notes if "the fix states the answer '28', which the task's verifier rejects" in n]
    assert refusals, result.notes
    assert fixes[2:6] == [(3, "fix"), (4, "fix"), (6, "fix"), (7, "fix")], fixes
    for i, step in ((4, 6), (5, 7)):
        assert replayed[i].new_content == run.steps[step].content.replace("\\boxed{28}", "\\boxed{16}")
    assert not any(re.search(r"STEP UNDER EXAMINATION: step (6|7)\b", p) for p in prompts)
    assert any("step 6 (critic) states again the wrong answer '28'" in n for n in result.notes), result.notes
    joint = replayed[-1]
    assert joint.step == 1 and {6, 7} <= {x.step for x in joint.also}
    assert result.annotation.status == "unresolved"


def test_a_prose_fix_that_restates_the_answer_unmarked_keeps_it(run: Trajectory):
    """`keeps_wrong_answer` for a fix whose prose holds the step's rejected 28 in no answer position (only its last
    number): `wrong_answer` reads no answer in it, the comparison with the step's answer catches it."""
    from rootstep.annotation import Meter, TaskContext
    from rootstep.annotation._propose import FixProposer

    task = run.recording.task
    propose = FixProposer(run, run.verdict, TaskContext(question=task.prompt, ground_truth=task.ground_truth, task=task),
                          lambda *a, **k: "", Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a), None, None)
    fix = "The code output is correct. Ahito ran 28 miles in total."
    assert propose.wrong_answer(fix) is None
    kept = propose.keeps_wrong_answer(run.steps[6], fix)
    assert kept is not None and kept.startswith("the fix keeps the answer '28' of step 6")
    assert propose.keeps_wrong_answer(run.steps[6], "The code output is wrong. Ahito ran 16 miles in total.") is None
