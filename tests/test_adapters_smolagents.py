"""smolagents 1.26 (manager CodeAgent + managed coder CodeAgent) run for real inside its sandbox image,
scripted LLM answers through the in-process gateway: a run that succeeds, one that fails, an exact
replay, an intervention on the coder's step that flips the outcome."""

from __future__ import annotations

import pytest

from rootstep.model import Intervention

from ._adapter_support import (
    add_task, assert_calls_linked_one_per_agent_step, assert_exact_replay, reply_when, scripted_env,
)

pytestmark = pytest.mark.docker

DELEGATE = ('Thought: I give the task to the coder.\n<code>\n'
            'answer = coder(task="Write a Python function add(a, b) that returns a + b. Tests: assert add(1, 2) == 3")\n'
            'print("coder finished")\n</code>')
RETURN = "Thought: The coder is done; I return its answer.\n<code>\nfinal_answer(answer)\n</code>"
# the coder tests its function in smolagents' Python executor (inside the container) before answering
TESTED = ('Thought: I write add and check it on the examples.\n<code>\n'
          'def add(a, b):\n    return a + b\n\nassert add(1, 2) == 3 and add(-1, 1) == 0\nprint("tests pass")\n'
          'final_answer("```python\\ndef add(a, b):\\n    return a + b\\n```")\n</code>')
CARELESS = ('Thought: This is simple, no need to test.\n<code>\n'
            'final_answer("```python\\ndef add(a, b):\\n    return a - b\\n```")\n</code>')


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    yield from scripted_env("smolagents", tmp_path_factory, docker_sandbox, {
        # the manager delegates to the coder, then returns its answer once the coder has finished
        "smol-test-manager": reply_when("coder finished", RETURN, DELEGATE),
        "smol-test-coder-good": lambda m, p: TESTED, "smol-test-coder-careless": lambda m, p: CARELESS})


@pytest.fixture(scope="module")
def failed(env):
    return env["adapter"].run(add_task(), "scripted/smol-test-manager",
                              agent_models={"coder": "scripted/smol-test-coder-careless"})


def test_coding_task_succeeds(env):
    t = env["adapter"].run(add_task(), "scripted/smol-test-manager", agent_models={"coder": "scripted/smol-test-coder-good"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert t.recording.framework_version == "1.26.0"
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("user", "human"), ("manager", "agent"), ("coder", "agent"), ("manager", "agent")]
    # ordered by start time: the manager's delegating step starts before the coder's step
    assert t.steps[1].started_at < t.steps[2].started_at < t.steps[3].started_at
    coder = t.steps[2]
    assert "tests pass" in coder.observation  # the coder's code really ran in the container
    assert coder.tool_calls[0]["name"] == "python_interpreter" and "def add" in coder.tool_calls[0]["arguments"]
    assert t.verdict.success and t.verdict.details["passed"] == 3
    assert_calls_linked_one_per_agent_step(t, env["gateway"], n_calls=3)


def test_coding_task_fails(failed):
    assert "error" not in failed.metadata, failed.metadata.get("traceback")
    assert [s.agent for s in failed.steps] == ["user", "manager", "coder", "manager"]
    assert "return a - b" in failed.final_answer
    assert failed.verdict.success is False and failed.verdict.details["passed"] == 0


def test_exact_replay_reproduces_the_run_with_zero_live_calls(env, failed):
    assert_exact_replay(env, failed, replayed_calls=3)


def test_intervention_on_the_coder_flips_the_outcome(env, failed):
    t = 2  # the coder's untested, wrong function: the decisive error
    assert failed.steps[t].agent == "coder"
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=TESTED))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1 and info.replayed_calls == 1
    assert [s.content_key() for s in r.steps[:t]] == [s.content_key() for s in failed.steps[:t]]
    assert r.steps[t].content == TESTED and "tests pass" in r.steps[t].observation
    assert info.live_calls == 1  # the manager's last step, after the intervention
    assert "return a + b" in r.final_answer
    assert r.verdict.success is True and failed.verdict.success is False
