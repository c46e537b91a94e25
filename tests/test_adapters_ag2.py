"""AG2 (autogen 0.14.1) GroupChat run for real inside its sandbox image, scripted LLM answers through the
in-process gateway: a run that succeeds, one that fails, an exact replay, an intervention that flips it."""

from __future__ import annotations

import pytest
from litellm.llms.custom_llm import CustomLLMError

from rootstep.model import Intervention

from ._adapter_support import add_task, assert_calls_linked_one_per_agent_step, assert_exact_replay, framework_env

pytestmark = pytest.mark.docker

RIGHT = "Here is the solution.\n```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\n```"
WRONG = "Here is the solution.\n```python\ndef add(a, b):\n    return a - b\n\nprint(add(1, 2))\n```"
FIX = "The executor printed -1 for add(1, 2), expected 3: add must return a + b. Fix it."


def _coder(messages, params):
    """Writes the wrong function until the critic asks for a fix."""
    return RIGHT if any("Fix it" in str(m.get("content")) for m in messages) else WRONG


def _critic(messages, params):
    """A careless critic: approves whatever it is shown."""
    return "The code ran without errors. TERMINATE"


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    from rootstep.gateway import register_script

    register_script("ag2-test-coder-right", lambda m, p: RIGHT)
    register_script("ag2-test-coder", _coder)
    register_script("ag2-test-critic", _critic)
    register_script("ag2-test-critic-unreachable", [CustomLLMError(status_code=503, message="Connection error.")], cycle=True)
    yield from framework_env("ag2", tmp_path_factory, docker_sandbox)


@pytest.fixture(scope="module")
def failed(env):
    return env["adapter"].run(add_task(), "scripted/ag2-test-coder", agent_models={"critic": "scripted/ag2-test-critic"})


def test_coding_task_succeeds(env):
    t = env["adapter"].run(add_task(), "scripted/ag2-test-coder-right", agent_models={"critic": "scripted/ag2-test-critic"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert t.framework == "ag2" and t.recording.framework_version == "0.14.1"
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("executor", "human"), ("coder", "agent"), ("executor", "tool"), ("critic", "agent")]
    assert "exitcode: 0" in t.steps[2].content and "Code output: 3" in t.steps[2].content
    assert t.verdict.success and t.verdict.details["passed"] == 3
    assert_calls_linked_one_per_agent_step(t, env["gateway"], n_calls=2)
    assert t.metadata["gateway_stats"]["live"] == 2


def test_coding_task_fails(failed):
    assert "error" not in failed.metadata, failed.metadata.get("traceback")
    assert [s.agent for s in failed.steps] == ["executor", "coder", "executor", "critic"]
    assert "Code output: -1" in failed.steps[2].content
    assert "return a - b" in failed.final_answer
    assert failed.verdict.success is False and failed.verdict.details["passed"] == 0


def test_exact_replay_reproduces_the_run_with_zero_live_calls(env, failed):
    assert_exact_replay(env, failed, replayed_calls=2)


def test_intervention_on_the_critic_flips_the_outcome(env, failed):
    t = 3  # the critic's approval of the wrong code: the decisive error
    assert failed.steps[t].agent == "critic"
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=FIX))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1
    assert [s.content_key() for s in r.steps[:t]] == [s.content_key() for s in failed.steps[:t]]
    assert r.steps[t].content == FIX and r.steps[t].agent == "critic"
    assert [s.agent for s in r.steps[t + 1:]] == ["coder", "executor", "critic"]
    assert "Code output: 3" in r.steps[t + 2].content
    assert info.live_calls == 2  # the coder's fix and the critic's approval went live
    assert r.verdict.success is True and failed.verdict.success is False


def test_intervention_on_a_tool_step_is_refused(env, failed):
    with pytest.raises(ValueError, match="only LLM-produced agent steps"):
        env["adapter"].replay(failed, Intervention(run_id=failed.id, step=2, new_content="x"))


def test_math_task(env):
    from rootstep.gateway import register_script
    from rootstep.model import Task

    task = Task(benchmark="gsm8k", task_id="eggs", kind="math", verifier="numeric", ground_truth="18",
                prompt="Janet's ducks lay 16 eggs per day. She eats three and bakes muffins with four. "
                       "She sells the rest at $2 per egg. How many dollars does she make every day?")
    register_script("ag2-test-solver", lambda m, p: "```python\nprint((16 - 3 - 4) * 2)\n```\nAnswer: 18")
    t = env["adapter"].run(task, "scripted/ag2-test-solver", agent_models={"critic": "scripted/ag2-test-critic"})
    assert "Code output: 18" in t.steps[2].content
    assert t.final_answer.endswith("Answer: 18") and t.verdict.success is True
    # the coder's prompt is the math one (prompts/ag2_coder.j2 renders per task kind)
    request = env["gateway"].calls(t.recording.gateway_run_id)[0].request
    assert "math problem" in request["messages"][0]["content"]


def test_a_provider_that_fails_for_good_makes_the_episode_an_infrastructure_error(env):
    """The critic's calls fail at the provider (service unavailable, after the gateway's own retries): AG2 gets an
    error, and whatever the driver reports is not a verdict on the agents (as smolagents' "Error in generating
    final LLM output: Connection error." final answer was stored as a failure)."""
    from rootstep.adapters.base import AdapterError

    # the gateway gives up after its own retries; AG2's OpenAI client (default max_retries=2) asks twice more: 3 calls
    with pytest.raises(AdapterError, match=r"3 LLM call\(s\) failed at the provider .*service_unavailable"):
        env["adapter"].run(add_task(), "scripted/ag2-test-coder", agent_models={"critic": "scripted/ag2-test-critic-unreachable"})


def test_an_episode_cut_by_its_time_limit_is_kept_as_a_failure_with_the_steps_it_made(env, docker_sandbox):
    """The critic never answers within the episode's 40 s: before the sandbox's limit the driver reports the steps
    made so far (the task, the coder's code, its execution), and the run is a failure for the time limit, not a
    run lost (`EpisodeTimedOut`, retried, then dropped)."""
    import time

    from rootstep.adapters import get_adapter
    from rootstep.adapters._drivers._episode import time_limit_margin
    from rootstep.adapters.base import default_verifier
    from rootstep.gateway import register_script

    register_script("ag2-test-critic-asleep", lambda m, p: (time.sleep(45), "TERMINATE")[1])
    adapter = get_adapter("ag2", gateway=env["server"], verifier=default_verifier(docker_sandbox), timeout_s=40)
    started = time.monotonic()
    t = adapter.run(add_task(), "scripted/ag2-test-coder-right", agent_models={"critic": "scripted/ag2-test-critic-asleep"})
    assert time.monotonic() - started < 40 and time_limit_margin(40) == 10
    assert [(s.agent, s.kind) for s in t.steps] == [("executor", "human"), ("coder", "agent"), ("executor", "tool")]
    assert t.verdict.success is False and t.verdict.details == {"failure": "time limit", "time_limit_s": 40.0}
    assert t.metadata["error"] == "time limit: the episode was cut after 40 s"
    assert t.steps[1].call_ids  # the coder's step is linked to its call as in any run


def test_provider_failures_leave_out_model_caused_errors_and_answered_retries():
    from rootstep.adapters.base import provider_failures
    from rootstep.model import LLMCall

    def call(n, digest, kind=None):
        error = None if kind is None else f"{kind} (5xx) after 3 attempt(s): boom"
        response = {"error": {"type": kind, "message": "boom"}} if kind else {"choices": []}
        return LLMCall(run_id="r", framework="ag2", benchmark="b", agent="a", request_hash=digest, counter=n, model="m", provider="scripted", mode="live",
                       request={}, response=response, error=error)

    assert provider_failures([call(0, "x", "context_window_exceeded"), call(1, "y", "bad_request")]) == []
    assert provider_failures([call(0, "x", "timeout"), call(1, "x")]) == []  # the framework's retry was answered
    assert provider_failures([call(0, "x", "timeout"), call(1, "y")]) == ["timeout: timeout (5xx) after 3 attempt(s): boom"]
