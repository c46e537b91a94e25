"""A step that already states the right answer is not the error, and no fix of it is a correction
(`FixProposer.right_answer`, `right_already`): the counterpart of `wrong_answer`.

The run is real (tests/fixtures/real_runs/metagpt_math500_algebra_2735.json): MetaGPT on MATH-500 algebra/2735 with
the 0.5B agents, from the 2026-11-29 slice (seed 17). Its coder's step 1 is a sympy program that prints the right
`9*a/20 + 11/20`; the team later lost it (its last program printed 6.0). The 1.5B analyzer's real ranked answer
named step 1 with a prose "fix" stating the wrong `\\frac{3a}{5}`; the 0.5B team's replay answered right by chance,
its control failed, and step 1 was labelled: a wrong label. The step's program runs in the real Docker sandbox
(sympy is in its image)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.annotation._budget import Meter
from rootstep.annotation._propose import FixProposer, TaskContext, json_object
from rootstep.benchmarks import sandbox_runner, verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Intervention, Recording, Step, Task, Trajectory, Usage, Verdict

pytestmark = pytest.mark.docker
FIXTURE = Path(__file__).parent / "fixtures" / "real_runs" / "metagpt_math500_algebra_2735.json"


def real_run() -> tuple[Trajectory, str]:
    data = json.loads(FIXTURE.read_text())
    task = Task.model_validate(data["task"])
    steps = [Step.model_validate({**s, "call_ids": [f"c{s['index']}"] if s["kind"] == "agent" else []})
             for s in data["steps"]]
    run = Trajectory(framework="metagpt", benchmark="math500", task_id=task.task_id, question=task.prompt,
                     ground_truth=task.ground_truth, steps=steps, final_answer=data["final_answer"],
                     verdict=Verdict.model_validate(data["verdict"]), recording=Recording(gateway_run_id="r", task=task))
    return run, data["ranked_answer"]


def check(task: Task, answer: str) -> Verdict:
    return verify(task, answer)


def test_a_step_whose_program_prints_the_right_answer_is_cleared_and_not_fixed(docker_sandbox):
    run, ranked = real_run()
    assert not run.verdict.success
    proposer = FixProposer(run, run.verdict, TaskContext.of(run), Chat("scripted/never-asked"), Meter(Budget()), [], [],
                           24_000, check, sandbox_runner(docker_sandbox), None)
    right = proposer.right_answer(run.steps[1])
    assert right is not None and "9*a/20" in right.replace(" ", "")
    problem = proposer.fix_problem(run.steps[1], json_object(ranked)[0]["suggested_fix"])
    assert problem is not None and problem.startswith("right_already: step 1 (coder) already states the answer")
    # the scan clears it without a call; the step that gave the final answer is never cleared this way
    found, why = proposer.ask_at(run.steps[1], [], set(), require_fix=False, source="earlier")
    assert why is None and found is not None and found.declined and "verifier accepts" in found.reason
    last = max(s.index for s in run.steps if s.kind == "agent")
    assert proposer.right_answer(run.steps[last]) is None


def test_the_real_ranked_fix_of_the_right_step_is_refused_and_the_chance_flip_is_no_label(docker_sandbox):
    run, ranked = real_run()
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        if "STEP UNDER EXAMINATION" in prompts[-1]:
            return json.dumps({"fix_needed": False, "reason": "this step is right"})
        return ranked

    register_script("right-step-analyzer", analyzer)
    replays: list[Intervention] = []

    def replay(i: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:  # any fix flips: the team's chance
        replays.append(i)  # (but the reviewer's step 12, the first to state a wrong answer: its correction is tried first)
        verdict = Verdict(success=i.kind == "fix" and i.step != 12, details={})
        return (run.model_copy(update={"verdict": verdict, "parent_run_id": run.id}), verdict,
                ReplayOutcome(cost=Usage(llm_calls=11)))

    result = find_decisive_step(run, analyzer=Chat("scripted/right-step-analyzer"), replay=replay,
                                budget=Budget(max_reasks=1), verify=check, run_program=sandbox_runner(docker_sandbox))
    assert not any(i.step == 1 for i in replays)  # the step that had the right answer is never "fixed"
    first = result.attempts[0].diagnosis  # the reviewer's `Answer: \\(\\frac{4+6a-1-3a}{5-4}\\)` given the task's answer
    assert (first.step, first.source, first.written) == (12, "grounded", "answer")
    assert (result.annotation.agent, result.annotation.step) != ("coder", 1)
    notes = result.annotation.evidence.notes
    assert any("right_already: step 1 (coder) already states the answer" in n for n in notes), notes
    assert any("step 1 (coder) states the answer" in n and "judged correct, the analyzer not asked" in n for n in notes)
