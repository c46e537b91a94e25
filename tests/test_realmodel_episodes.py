"""Framework episodes on the real offline model, end to end in Docker: AG2's GroupChat on a real GSM8K
task with every agent on Qwen2.5-Coder-0.5B-Instruct through the gateway; the run is recorded, replayed
exactly with no live call, an intervention is forced and the run re-simulated live after it, and every
trajectory lands in the warehouse with Omega's verdict.

Real output: the tests assert invariants (links, counts, verdicts present, identical replays), never what
the model wrote or whether it solved the task.
"""

from __future__ import annotations

import pytest

from rootstep.model import Intervention

from ._adapter_support import framework_env

pytestmark = [pytest.mark.docker, pytest.mark.realmodel, pytest.mark.slow]

MODEL = "local/qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    pytest.importorskip("xllamacpp")
    yield from framework_env("ag2", tmp_path_factory, docker_sandbox)


@pytest.fixture(scope="module")
def task():
    from rootstep.benchmarks import load_tasks

    return load_tasks("gsm8k", limit=1, seed=0)[0]


@pytest.fixture(scope="module")
def recorded(env, task):
    t = env["adapter"].run(task, MODEL)
    assert "error" not in t.metadata, t.metadata.get("traceback") or t.metadata.get("error")
    return t


def test_an_episode_on_the_real_model_is_recorded_step_by_step(env, recorded):
    assert recorded.verdict is not None and recorded.model == MODEL
    calls = {c.id: c for c in env["gateway"].calls(recorded.recording.gateway_run_id)}
    agent_steps = [s for s in recorded.steps if s.kind == "agent"]
    assert agent_steps and all(s.call_ids for s in agent_steps)
    for step in agent_steps:
        for call_id in step.call_ids:
            call = calls[call_id]
            assert call.model == MODEL and call.provider == "local" and not call.simulated and call.mode == "live"
            assert call.completion_tokens > 0 and call.agent == step.agent
    assert recorded.prompt_tokens > 0 and recorded.completion_tokens > 0


def test_the_real_run_replays_exactly_with_no_live_call(env, recorded):
    r = env["adapter"].replay(recorded)
    info = r.replay
    assert info.live_calls == 0 and info.divergence is None and info.identical is True
    assert info.replayed_calls == len(env["gateway"].calls(recorded.recording.gateway_run_id))
    assert [s.content_key() for s in r.steps] == [s.content_key() for s in recorded.steps]
    assert r.verdict.success == recorded.verdict.success and r.final_answer == recorded.final_answer


def test_an_intervention_is_forced_and_the_rest_of_the_run_goes_live(env, recorded, task, tmp_path):
    from rootstep.warehouse import Warehouse

    first = next(s for s in recorded.steps if s.kind == "agent")
    fix = ("Let me compute it step by step in Python.\n```python\n# the reference computation, checked line by line\n"
           f"answer = {task.ground_truth}\nprint(answer)\n```")
    r = env["adapter"].replay(recorded, Intervention(run_id=recorded.id, step=first.index, new_content=fix))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1 and info.divergence is None
    assert r.steps[first.index].content == fix and r.steps[first.index].agent == first.agent
    assert r.verdict is not None and r.parent_run_id == recorded.id
    later_calls = [c for c in env["gateway"].calls(r.recording.gateway_run_id) if c.mode == "live"]
    assert len(later_calls) == info.live_calls  # what came after the forced step was asked of the real model
    warehouse = Warehouse(tmp_path / "wh")
    warehouse.write_trajectories([recorded, r])
    rows = warehouse.rows("SELECT id, success FROM runs ORDER BY id")
    assert {row["id"]: row["success"] for row in rows} == {recorded.id: recorded.verdict.success, r.id: r.verdict.success}
