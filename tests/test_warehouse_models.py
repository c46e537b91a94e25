"""The data model: content-derived ids and validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rootstep.model import Annotation, Intervention, LLMCall, Replay, Step, Trajectory, Verdict


def _trajectory(**overrides) -> Trajectory:
    fields = dict(
        framework="ag2",
        benchmark="gsm8k",
        task_id="7",
        question="2+2?",
        ground_truth="4",
        steps=[
            Step(index=0, agent="planner", content="compute 2+2", call_ids=["call_a"]),
            Step(index=1, agent="executor", kind="tool", content="print(2+2)", observation="5"),
            Step(index=2, agent="planner", content="The answer is 5", call_ids=["call_b"]),
        ],
        final_answer="5",
        verdict=Verdict(success=False),
    )
    fields.update(overrides)
    return Trajectory(**fields)


def test_ids_are_content_derived_and_ignore_timing():
    a = _trajectory()
    b = _trajectory(duration_s=12.5, prompt_tokens=100, cost_usd=0.3, metadata={"note": "x"})
    assert a.id == b.id and a.id.startswith("run_")
    assert _trajectory(final_answer="4").id != a.id
    changed = a.model_copy(deep=True)
    changed.steps[1].observation = "4"
    assert changed.id != a.id


def test_trajectory_agents_and_success():
    t = _trajectory()
    assert t.agents == ["planner", "executor"]
    assert t.success is False
    assert _trajectory(verdict=None).success is None


def test_step_indices_must_be_zero_based_and_ordered():
    with pytest.raises(ValidationError, match="indices must be 0..n-1"):
        _trajectory(steps=[Step(index=1, agent="a")])
    with pytest.raises(ValidationError):
        Step(index=-1, agent="a")


def test_only_agent_steps_link_llm_calls():
    with pytest.raises(ValidationError, match="tool step cannot be produced by LLM calls"):
        Step(index=0, agent="executor", kind="tool", call_ids=["c"])
    with pytest.raises(ValidationError):
        Step(index=0, agent="a", kind="robot")


def test_partition_values_must_be_path_safe():
    with pytest.raises(ValidationError, match="names a warehouse partition folder"):
        _trajectory(framework="../etc")
    with pytest.raises(ValidationError, match="benchmark"):
        _trajectory(benchmark="a/b")


def test_annotation_rules_and_id():
    a = Annotation(run_id="run_x", framework="ag2", benchmark="gsm8k", method="human", agent="planner", step=2, verified=True)
    again = Annotation(run_id="run_x", framework="ag2", benchmark="gsm8k", method="human", agent="planner", step=2, verified=True)
    assert a.id == again.id  # created_at differs, the id does not
    with pytest.raises(ValidationError, match="needs both agent and step"):
        Annotation(run_id="run_x", framework="ag2", benchmark="gsm8k", method="counterfactual", agent="planner")
    with pytest.raises(ValidationError, match="cannot be verified"):
        Annotation(run_id="run_x", framework="ag2", benchmark="gsm8k", method="counterfactual", status="unresolved", verified=True)
    with pytest.raises(ValidationError):
        Annotation(run_id="run_x", framework="ag2", benchmark="gsm8k", method="guess", agent="a", step=0)


def test_llm_call_replay_and_intervention():
    call = LLMCall(run_id="run_x", framework="ag2", benchmark="gsm8k", agent="planner", request_hash="h", counter=0, model="m", provider="scripted", simulated=True)
    assert call.id == LLMCall(**call.model_dump(exclude={"created_at"})).id
    intervention = Intervention(run_id="run_x", step=2, new_content="The answer is 4")
    replay = Replay(run_id="run_x", framework="ag2", benchmark="gsm8k", intervention=intervention, purpose="counterfactual", success_before=False, success_after=True)
    assert replay.flipped
    assert not Replay(run_id="run_x", framework="ag2", benchmark="gsm8k", purpose="exact", success_before=False, success_after=False).flipped
    with pytest.raises(ValidationError):
        Intervention(run_id="run_x", step=-1, new_content="x")
