"""A step that tests the task's function is cleared when its assertions hold on the task's reference solution and
caught the error of the failing code before it (`FixProposer.right_tests`), with no analyzer call.

The run is real (tests/fixtures/real_runs/metagpt_humanevalplus_127.json: MetaGPT on HumanEval/127, the agents on the
0.5B, seed-31 slice of 2026-12-02): the coder's step 1 returns 'YES' for [[-1, 1], [0, 4]], the tester's step 2
asserts the right 'NO' and the runner's step 3 reports the AssertionError. There the 1.5B said the tester's step needed
a fix and gave it unchanged: the step was left open and the scan stopped. The programs run in the Docker sandbox, the
task's tests in the local one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, Meter, TaskContext
from rootstep.annotation._propose import FixProposer
from rootstep.benchmarks import load_tasks, sandbox_runner, verify
from rootstep.model import Recording, Step, Task, Trajectory
from rootstep.sandboxes import get_sandbox

pytestmark = pytest.mark.docker
DATA = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "metagpt_humanevalplus_127.json").read_text())
WEAK = '```python\nassert intersection((1, 2), (2, 3)) == "NO"\nassert intersection((-3, -1), (-5, 5)) == "YES"\n```'
"""Assertions that hold on the reference solution and on the coder's failing code alike: they could not catch it."""


@pytest.fixture(scope="module")
def task() -> Task:
    return next(t for t in load_tasks("humanevalplus") if t.task_id == DATA["task_id"])


@pytest.fixture(scope="module")
def runner(docker_sandbox):
    return sandbox_runner(docker_sandbox)


def real_run(task: Task, tester: str | None = None) -> Trajectory:
    steps = [Step.model_validate(s) for s in DATA["steps"]]
    if tester is not None:
        steps[2] = steps[2].model_copy(update={"content": tester})
    return Trajectory(framework="metagpt", benchmark="humanevalplus", task_id=task.task_id, question=task.prompt,
                      steps=steps, final_answer=DATA["final_answer"], recording=Recording(gateway_run_id="real", task=task))


def proposer(run: Trajectory, task: Task, runner: Any) -> FixProposer:
    def no_analyzer(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("the analyzer is not asked about a step the task's reference judges")

    local = get_sandbox("local", allow_local=True)
    return FixProposer(run, None, TaskContext(question=task.prompt, task=task), no_analyzer, Meter(Budget()), [], [],
                       24_000, lambda t, a: verify(t, a, sandbox=local), runner, None)


def test_the_testers_right_assertions_are_cleared_with_no_analyzer_call(task, runner):
    run = real_run(task)
    propose = proposer(run, task, runner)
    tester = run.steps[2]
    assert tester.agent == "tester" and 'assert intersection((-1, 1), (0, 4)) == "NO"' in tester.content
    caught = propose.right_tests(tester)
    assert caught is not None and "fail on step 1's failing code" in caught
    diagnosis, why = propose.ask_at(tester, [], set(), require_fix=False, source="earlier")
    assert why is None and diagnosis is not None and diagnosis.declined and diagnosis.step == 2
    assert any("step 2 (tester)" in n and "judged correct, the analyzer not asked" in n for n in propose.notes)
    # a fix of the cleared step is no correction: the ranked answer naming it is refused and re-asked
    problem = propose.fix_problem(tester, tester.content.replace('"NO"', '"YES"'))
    assert problem is not None and "it is not the error" in problem


def test_an_assertion_the_reference_fails_is_not_cleared(task, runner):
    wrong = '```python\nassert intersection((1, 2), (2, 3)) == "YES"\n```'
    run = real_run(task, tester=wrong)
    assert proposer(run, task, runner).right_tests(run.steps[2]) is None


def test_tests_the_failing_code_passes_are_too_weak_to_clear(task, runner):
    """Both assertions hold on the coder's code too: a test that misses the error may be the decisive step."""
    run = real_run(task, tester=WEAK)
    propose = proposer(run, task, runner)
    assert propose.failing_code(run.steps[1].content) is not None
    assert propose.right_tests(run.steps[2]) is None


def test_tests_written_before_any_failing_code_are_left_to_the_analyzer(task, runner):
    """True assertions with no failing code before them caught nothing yet: whether they test enough is not the
    reference's to say."""
    run = real_run(task)
    first = run.model_copy(update={"steps": [run.steps[0], run.steps[2].model_copy(update={"index": 1})]})
    assert proposer(first, task, runner).right_tests(first.steps[1]) is None


def test_only_a_test_of_the_tasks_function_with_a_runner_is_read(task, runner):
    run = real_run(task)
    propose = proposer(run, task, runner)
    assert propose.right_tests(run.steps[1]) is None  # the coder writes the function: not a test of it
    prints = run.steps[2].model_copy(update={"content": "```python\nprint(intersection((1, 2), (2, 3)))\n```"})
    assert propose.right_tests(prints) is None  # no assertion: it checks nothing
    assert proposer(run, task, None).right_tests(run.steps[2]) is None  # nothing runs programs: nothing cleared
    no_reference = task.model_copy(update={"metadata": {k: v for k, v in task.metadata.items()
                                                        if k != "reference_solution"}})
    assert proposer(real_run(no_reference), no_reference, runner).right_tests(run.steps[2]) is None
