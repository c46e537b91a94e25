"""An empty agent step that its agent takes up again is no error: the scan clears it with no analyzer call
(`FixProposer.retaken_empty`) instead of leaving it open, where it stopped the scan.

The replies are real (tests/fixtures/golden_real/smolagents-mbppplus-right.json: the 0.5B as the smolagents manager on
MBPP+ 309 sent its function, three empty replies, then the function again), recorded as smolagents records them (the
closing `</code>` added after a reply that has text).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootstep.annotation import Budget, Meter, TaskContext
from rootstep.annotation._propose import FixProposer
from rootstep.benchmarks import load_tasks
from rootstep.model import Recording, Step, Trajectory

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "golden_real" / "smolagents-mbppplus-right.json").read_text())
TASK = next(t for t in load_tasks("mbppplus") if t.task_id == GOLDEN["task_id"])


def steps(agents: list[str] | None = None) -> list[Step]:
    replies = GOLDEN["replies"]
    agents = agents or [r["agent"] for r in replies]
    out = [Step(index=0, agent="user", kind="human", content=TASK.prompt)]
    for i, (reply, agent) in enumerate(zip(replies, agents), 1):
        text = reply["content"]
        out.append(Step(index=i, agent=agent, kind="agent", content=text + "</code>" if text else text,
                        observation="Last output from code snippet:\nNone"))
    return out


def proposer(run_steps: list[Step]) -> FixProposer:
    def no_analyzer(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("the analyzer is not asked about an empty step its agent took up again")

    run = Trajectory(framework="smolagents", benchmark="mbppplus", task_id=TASK.task_id, question=TASK.prompt,
                     steps=run_steps, final_answer="", recording=Recording(gateway_run_id="real", task=TASK))
    return FixProposer(run, None, TaskContext(question=TASK.prompt, task=TASK), no_analyzer, Meter(Budget()), [], [],
                       24_000, None, None, None)


def test_the_real_replies_hold_three_empty_manager_steps():
    assert [s.content == "" for s in steps()[1:]] == [False, True, True, True, False]


@pytest.mark.parametrize("index", [2, 3, 4])
def test_an_empty_step_the_agent_took_up_again_is_cleared_with_no_call(index):
    run_steps = steps()
    propose = proposer(run_steps)
    diagnosis, why = propose.ask_at(run_steps[index], [], set(), require_fix=False, source="sequential")
    assert why is None and diagnosis is not None and diagnosis.declined and diagnosis.step == index
    assert f"took the work up again at step {index + 1}" in diagnosis.reason
    assert any(f"step {index} (manager) is empty" in note for note in propose.notes)


def test_an_empty_last_step_is_not_cleared():
    assert proposer(steps()[:3]).retaken_empty(steps()[2]) is None  # no step after it did the work


def test_an_empty_step_another_agent_follows_is_not_cleared():
    run_steps = steps(["manager", "manager", "coder", "manager", "manager"])
    assert proposer(run_steps).retaken_empty(run_steps[2]) is None  # the coder, not the manager, spoke next


def test_a_step_with_text_or_calls_is_not_empty():
    run_steps = steps()
    propose = proposer(run_steps)
    assert propose.retaken_empty(run_steps[1]) is None
    calling = run_steps[2].model_copy(update={"tool_calls": [{"name": "final_answer", "arguments": {"answer": "1"}}]})
    assert propose.retaken_empty(calling) is None
