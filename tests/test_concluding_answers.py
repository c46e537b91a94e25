"""A message that ends by stating its value in inline math (`... is \\( x = 3 \\).`) states that answer.

The run is real (tests/fixtures/real_runs/agentprune_math500_algebra_1031.json: AgentPrune on MATH-500 algebra/1031,
the agents on the 0.5B, seed-43 slice of 2026-12-03). The programmer's step 2, `The smallest real number \\( x \\) in
the domain of the function ... is \\( x = 3 \\).`, is where the team's final `Answer: 3` came from (the answer is
11/2), but no answer was read in it: the 1.5B judged it correct and the search labelled the math solver's step 1,
whose 14.6 the team had dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rootstep.annotation import Budget, Meter, TaskContext
from rootstep.annotation._propose import FixProposer
from rootstep.benchmarks import answer_spans, verify
from rootstep.model import Recording, Step, Task, Trajectory

DATA = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "agentprune_math500_algebra_1031.json").read_text())
TASK = Task.model_validate(DATA["task"])
STEPS = [Step.model_validate(s) for s in DATA["steps"]]


def test_the_programmers_concluding_value_is_its_answer():
    assert STEPS[2].agent == "programmer" and STEPS[2].content.endswith(r"is \( x = 3 \).")
    assert answer_spans(STEPS[2].content)[0] == ("x = 3", "answer_phrase")


def test_the_step_states_a_wrong_answer_so_it_is_not_judged_correct():
    run = Trajectory(framework="agentprune", benchmark="math500", task_id=TASK.task_id, question=TASK.prompt,
                     ground_truth=TASK.ground_truth, steps=STEPS, final_answer=DATA["final_answer"],
                     verdict=verify(TASK, DATA["final_answer"]), recording=Recording(gateway_run_id="real", task=TASK))
    propose = FixProposer(run, run.verdict, TaskContext(question=TASK.prompt, ground_truth=TASK.ground_truth, task=TASK),
                          lambda *a, **k: "", Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a), None, None)
    assert propose.wrong_answer(STEPS[2].content) == "x = 3"
    assert propose.right_answer(STEPS[2]) is None


@pytest.mark.parametrize("text, span", [
    (r"So the number is $2$.", "2"),
    (r"The smallest value is \( \frac{11}{2} \)", r"\frac{11}{2}"),
    ("The number is 3.", "3"),  # the smolagents manager's final answer, MATH-500 algebra/251, seed-43 slice
    ("Thinking it over.\nSo the smallest x is 3.5.", "3.5"),
    ("The result is x = 3.", "x = 3"),
    (r"The value of \( f(2) \) is \frac{1}{2}.", r"\frac{1}{2}"),
])
def test_other_concluding_values(text, span):
    assert (span, "answer_phrase") in answer_spans(text)


@pytest.mark.parametrize("text", [
    r"This is \( x \) and we proceed.",  # the value is not at the end
    r"The value of x is \( the number of apples \).",  # prose in the math: not a bare value
    r"The expression inside the square root is \( (x-3)^2 - (x-8)^2 \geq 0 \) so we expand it.",
    "The total is 5 apples.",  # a word after the value
    "Step one is to add.",  # no value
    "It is 2 which is even.",  # prose after the value
    "The number is 3.\nNext we check it.",  # not the last line
])
def test_prose_that_does_not_conclude_with_a_value(text):
    assert all(method != "answer_phrase" for _, method in answer_spans(text))


def test_a_one_line_plain_answer_is_corrected_in_place():
    """The smolagents manager's final answer on MATH-500 algebra/251 (seed-43 slice) was `The number is 3.` (the answer
    is 2): read as prose, it stated no answer, so no fix put the task's answer in it and the 1.5B judged it correct."""
    from rootstep.benchmarks import load_tasks

    task = next(t for t in load_tasks("math500") if t.task_id == "test/algebra/251.json")
    steps = [Step(index=0, agent="user", kind="human", content=task.prompt),
             Step(index=1, agent="manager", content="The number is 3.")]
    run = Trajectory(framework="smolagents", benchmark="math500", task_id=task.task_id, question=task.prompt,
                     ground_truth=task.ground_truth, steps=steps, final_answer="The number is 3.",
                     verdict=verify(task, "The number is 3."), recording=Recording(gateway_run_id="real", task=task))
    assert not run.verdict.success
    propose = FixProposer(run, run.verdict, TaskContext(question=task.prompt, ground_truth=task.ground_truth, task=task),
                          lambda *a, **k: "", Meter(Budget()), [], [], 24_000, lambda t, a: verify(t, a), None, None)
    assert propose.wrong_answer(steps[1].content) == "3"
    assert propose.from_answer(steps[1]) == "The number is 2."
