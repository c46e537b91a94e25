"""MetaGPT 0.8.2 (a Team of coder, tester, runner and reviewer Roles) run for real inside its sandbox
image, scripted LLM answers through the in-process gateway: a run that succeeds, one that fails, an
exact replay, an intervention on the reviewer's step that flips the outcome."""

from __future__ import annotations

import pytest

from rootstep.model import Intervention

from ._adapter_support import add_task, assert_exact_replay, reply_when, scripted_env

pytestmark = pytest.mark.docker

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
TESTS = "```python\nassert add(1, 2) == 3\nassert add(10, 5) == 15\nprint('all asserts passed')\n```"
CHANGES = "The asserts failed: add(1, 2) must be 3. Return a + b instead of a - b."


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    yield from scripted_env("metagpt", tmp_path_factory, docker_sandbox, {
        # the coder writes the wrong function until a review asks for a change
        "mgpt-test-coder": reply_when("Return a + b instead", RIGHT, WRONG),
        "mgpt-test-coder-right": lambda m, p: RIGHT, "mgpt-test-tester": lambda m, p: TESTS,
        "mgpt-test-reviewer": lambda m, p: "APPROVED"})  # a careless reviewer


def _run(env, coder: str):
    return env["adapter"].run(add_task(), f"scripted/{coder}",
                              agent_models={"tester": "scripted/mgpt-test-tester", "reviewer": "scripted/mgpt-test-reviewer"})


@pytest.fixture(scope="module")
def failed(env):
    return _run(env, "mgpt-test-coder")


def test_coding_task_succeeds(env):
    t = _run(env, "mgpt-test-coder-right")
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert t.recording.framework_version == "0.8.2"
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("user", "human"), ("coder", "agent"), ("tester", "agent"), ("runner", "tool"), ("reviewer", "agent")]
    assert t.steps[3].content.startswith("exit code 0") and "all asserts passed" in t.steps[3].content
    assert t.verdict.success and t.verdict.details["passed"] == 3
    calls = {c.id: c for c in env["gateway"].calls(t.recording.gateway_run_id)}
    assert len(calls) == 3 and t.metadata["unlinked_calls"] == []
    for step in t.steps:
        if step.kind == "agent":
            (call_id,) = step.call_ids
            assert (calls[call_id].agent, calls[call_id].step_index) == (step.agent, step.index)
        else:
            assert step.call_ids == []


def test_coding_task_fails(failed):
    assert "error" not in failed.metadata, failed.metadata.get("traceback")
    assert [s.agent for s in failed.steps] == ["user", "coder", "tester", "runner", "reviewer"]
    assert failed.steps[3].content.startswith("exit code 1") and "AssertionError" in failed.steps[3].content
    assert "return a - b" in failed.final_answer
    assert failed.verdict.success is False


def test_exact_replay_reproduces_the_run_with_zero_live_calls(env, failed):
    assert_exact_replay(env, failed, replayed_calls=3)


def test_intervention_on_the_reviewer_flips_the_outcome(env, failed):
    t = 4  # the reviewer approved code whose asserts failed: the decisive error
    assert failed.steps[t].agent == "reviewer"
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=CHANGES))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1 and info.replayed_calls == 2
    assert [s.content_key() for s in r.steps[:t]] == [s.content_key() for s in failed.steps[:t]]
    assert r.steps[t].content == CHANGES
    assert [s.agent for s in r.steps[t + 1:]] == ["coder", "tester", "runner", "reviewer"]
    assert r.steps[t + 3].content.startswith("exit code 0")
    assert info.live_calls == 3
    assert r.verdict.success is True
