"""OWL-Workforce (camel-ai 0.2.90 `Workforce`: planner, coordinator, coder and reviewer workers) run for
real inside its sandbox image, scripted LLM answers through the in-process gateway: a run that succeeds,
one that fails, an exact replay, an intervention that flips the outcome and one that does not, a math task.

The scripts answer camel's own prompts in the formats camel parses: the planner's decomposition as
`<tasks><task>...</task></tasks>` and its quality checks as TaskAnalysisResult JSON, the coordinator's
assignments as TaskAssignResult JSON, the workers' results as TaskResult JSON (all in ```json blocks,
camel's structured-output handler extracts them). The planner rejects the first attempt at `task.1`
(camel then retries it with the same worker), so every coding run goes through camel's retry path."""

from __future__ import annotations

import json
import re

import pytest

from rootstep.model import Intervention, Task

from ._adapter_support import (
    add_task, assert_calls_linked_one_per_agent_step, assert_exact_replay, framework_env, last_message_text,
)

pytestmark = pytest.mark.docker

DECOMPOSE = (
    "<tasks>\n"
    "<task>Write a Python function add(a, b) that returns the sum of a and b, run it on the examples "
    "assert add(1, 2) == 3 and assert add(-1, 1) == 0 with the execute_code tool, and return the complete "
    "function in a python code block.</task>\n"
    "<task>Review the Python function add(a, b), which must return the sum of a and b, and return the final "
    "function in a python code block.</task>\n"
    "</tasks>"
)
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"
TEST_CODE = "def add(a, b):\n    return a + b\n\nassert add(1, 2) == 3 and add(-1, 1) == 0\nprint('tests pass')\n"


def _json(value) -> str:
    return "```json\n" + json.dumps(value) + "\n```"


def _result(content: str) -> str:
    return _json({"content": content, "failed": False})


def _assign(*assignments) -> str:
    return _json({"assignments": [{"task_id": t, "assignee_id": w, "dependencies": d} for t, w, d in assignments]})


def _quality(score: int, strategy: str | None = None) -> str:
    return _json({"quality_score": score, "reasoning": "checked", "issues": [] if score >= 60 else ["not run on the examples"],
                  "recovery_strategy": strategy, "modified_task_content": None})


def _planner(decomposition: str):
    """Decomposes into `decomposition`; rejects the first attempt at task.1 (retry), accepts the rest."""

    def answer(messages, params):
        text = last_message_text(messages)
        if "decompose a complex task" in text:
            return decomposition
        if "evaluate its quality" in text:
            if "Task ID: task.1" in text and "Failure Count: 0" in text and "add(" in text:
                return _quality(40, "retry")
            return _quality(90)
        return AssertionError(f"unexpected planner prompt: {text[:300]}")

    return answer


def _coder_good(messages, params):
    """Runs its function on the examples with camel's execute_code tool, then returns it."""
    if messages[-1].get("role") == "tool":
        return _result(GOOD)
    return {"content": "I run add on the examples first.",
            "tool_calls": [{"name": "execute_code", "arguments": {"code": TEST_CODE, "code_type": "python"}}]}


def _reviewer(messages, params):
    """Approves whatever the coder delivered, repeating its last code block."""
    blocks = re.findall(r"```python\n(.*?)\n```", last_message_text(messages), re.DOTALL)
    code = blocks[-1] if blocks else "# no code received"
    return _result(f"Approved.\n```python\n{code}\n```")


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    from rootstep.gateway import register_script

    register_script("owl-test-planner", _planner(DECOMPOSE))
    register_script("owl-test-coordinator", lambda m, p: _assign(("task.1", "coder", []), ("task.2", "reviewer", ["task.1"])))
    register_script("owl-test-coder-good", _coder_good)
    register_script("owl-test-coder-careless", lambda m, p: _result(BAD))
    register_script("owl-test-reviewer", _reviewer)
    yield from framework_env("owl", tmp_path_factory, docker_sandbox)


def _models(coder: str) -> dict[str, str]:
    return {"coordinator": "scripted/owl-test-coordinator", "reviewer": "scripted/owl-test-reviewer",
            "coder": f"scripted/owl-test-coder-{coder}"}


EXPECTED = [  # (agent, action, task) of every step after the task, careless coder
    ("planner", "decompose", "task"), ("coordinator", "assign", None), ("coder", "process_task", "task.1"),
    ("planner", "quality_check", "task.1"), ("coder", "process_task", "task.1"),
    ("planner", "quality_check", "task.1"), ("reviewer", "process_task", "task.2"),
    ("planner", "quality_check", "task.2"),
]


@pytest.fixture(scope="module")
def failed(env):
    return env["adapter"].run(add_task(), "scripted/owl-test-planner", agent_models=_models("careless"))


def test_coding_task_succeeds(env):
    t = env["adapter"].run(add_task(), "scripted/owl-test-planner", agent_models=_models("good"))
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert t.recording.framework_version == "0.2.90"
    # the good coder makes two calls per attempt (execute_code, then its result): 10 steps after the task
    assert [(s.agent, s.metadata.get("action")) for s in t.steps[1:]] == [
        ("planner", "decompose"), ("coordinator", "assign"), ("coder", "process_task"), ("coder", "process_task"),
        ("planner", "quality_check"), ("coder", "process_task"), ("coder", "process_task"),
        ("planner", "quality_check"), ("reviewer", "process_task"), ("planner", "quality_check")]
    assert (t.steps[0].agent, t.steps[0].kind) == ("user", "human")
    run_code = t.steps[3]
    assert run_code.tool_calls[0]["name"] == "execute_code" and "def add" in run_code.tool_calls[0]["arguments"]["code"]
    # camel's subprocess interpreter really ran the code in the container; its output is the observation
    assert "tests pass" in run_code.observation and "Executed the code below" in run_code.observation
    assert t.steps[4].observation is None and '"failed": false' in t.steps[4].content
    # the workforce's lifecycle events (callbacks) are kept in the steps' metadata
    events = [e for s in t.steps for e in s.metadata.get("events", [])]
    assert {"event": "task_decomposed", "parent_task_id": "task", "subtask_ids": ["task.1", "task.2"]} in events
    assert any(e["event"] == "task_failed" and "quality check" in e["error_message"] for e in events)
    assert events[-1] == {"event": "all_tasks_completed"}
    assert t.steps[0].metadata["subtasks"] == [{"id": "task.1", "state": "DONE", "worker": "coder"},
                                               {"id": "task.2", "state": "DONE", "worker": "reviewer"}]
    assert t.final_answer.startswith("--- Subtask task.1 Result ---") and "return a + b" in t.final_answer
    assert t.verdict.success and t.verdict.details["passed"] == 3
    assert_calls_linked_one_per_agent_step(t, env["gateway"], n_calls=10)


def test_coding_task_fails(env, failed):
    assert "error" not in failed.metadata, failed.metadata.get("traceback")
    assert [(s.agent, s.metadata.get("action"), s.metadata.get("task_id")) for s in failed.steps[1:]] == EXPECTED
    assert all(s.kind == "agent" and len(s.call_ids) == 1 for s in failed.steps[1:])
    assert "return a - b" in failed.final_answer
    assert failed.verdict.success is False and failed.verdict.details["passed"] == 0
    # camel's retry prompt carries the first attempt (worker id pinned to "coder", not a clone's uuid)
    retry = env["gateway"].calls(failed.recording.gateway_run_id)[4].request
    assert "Attempt by coder (from pool/clone of coder)" in retry["messages"][-1]["content"]


def test_exact_replay_reproduces_the_run_with_zero_live_calls(env, failed):
    assert_exact_replay(env, failed, replayed_calls=8)


def test_intervention_on_the_coders_last_attempt_flips_the_outcome(env, failed):
    t = 5  # the coder's second, still untested and wrong, attempt: the decisive error
    assert (failed.steps[t].agent, failed.steps[t].metadata["task_id"]) == ("coder", "task.1")
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=_result(GOOD)))
    info = r.replay
    assert "error" not in r.metadata, r.metadata.get("traceback")
    assert info.prefix_identical is True and info.forced_calls == 1 and info.replayed_calls == 4
    assert [s.content_key() for s in r.steps[:t]] == [s.content_key() for s in failed.steps[:t]]
    assert r.steps[t].content == _result(GOOD)
    assert info.live_calls == 3  # quality check, reviewer, quality check: after the intervention
    assert [(s.agent, s.metadata.get("action")) for s in r.steps[t + 1:]] == [
        ("planner", "quality_check"), ("reviewer", "process_task"), ("planner", "quality_check")]
    assert "return a + b" in r.steps[t + 2].content  # the reviewer now approves the corrected function
    assert r.verdict.success is True and failed.verdict.success is False


def test_intervention_on_the_first_attempt_does_not_flip_it(env, failed):
    """The planner's quality check rejects the first attempt whatever it holds, so camel retries task.1
    and the careless coder's second attempt replaces the corrected one: step 3 is not decisive."""
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=3, new_content=_result(GOOD)))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1 and info.replayed_calls == 2
    assert [(s.agent, s.metadata.get("action"), s.metadata.get("task_id")) for s in r.steps[1:]] == EXPECTED
    assert info.live_calls == 5
    assert "return a - b" in r.final_answer and r.verdict.success is False


def test_independent_subtasks_take_turns_and_replay_exactly(env):
    """Without dependencies camel posts both subtasks at once; the workers still run one at a time, in
    posting order (task.1, task.2, then task.1's retry), so the run replays exactly."""
    from rootstep.gateway import register_script

    register_script("owl-test-coordinator-parallel",
                    lambda m, p: _assign(("task.1", "coder", []), ("task.2", "reviewer", [])))
    models = {**_models("careless"), "coordinator": "scripted/owl-test-coordinator-parallel"}
    t = env["adapter"].run(add_task("add-parallel"), "scripted/owl-test-planner", agent_models=models)
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert [(s.agent, s.metadata.get("task_id")) for s in t.steps[3:]] == [
        ("coder", "task.1"), ("planner", "task.1"), ("reviewer", "task.2"), ("planner", "task.2"),
        ("coder", "task.1"), ("planner", "task.1")]
    assert all(a.started_at <= b.started_at for a, b in zip(t.steps[1:], t.steps[2:]))
    r = env["adapter"].replay(t)
    assert r.replay.identical is True and r.replay.live_calls == 0


def test_math_task(env):
    from rootstep.gateway import register_script

    task = Task(benchmark="gsm8k", task_id="eggs", kind="math", verifier="numeric", ground_truth="18",
                prompt="Janet's ducks lay 16 eggs per day. She eats three and bakes muffins with four. "
                       "She sells the rest at $2 per egg. How many dollars does she make every day?")

    def solver(messages, params):
        if messages[-1].get("role") == "tool":
            return _result("The code printed 18.\nAnswer: 18")
        return {"content": None, "tool_calls": [{"name": "execute_code", "arguments": {"code": "print((16 - 3 - 4) * 2)"}}]}

    register_script("owl-test-math-planner", _planner(
        "<tasks>\n<task>Compute how many dollars Janet makes every day selling 16 - 3 - 4 eggs at $2 each; "
        "end with a line Answer: <number>.</task>\n</tasks>"))
    register_script("owl-test-math-coordinator", lambda m, p: _assign(("task.1", "coder", [])))
    register_script("owl-test-math-coder", solver)
    t = env["adapter"].run(task, "scripted/owl-test-math-planner",
                           agent_models={"coordinator": "scripted/owl-test-math-coordinator",
                                         "coder": "scripted/owl-test-math-coder"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert [s.agent for s in t.steps] == ["user", "planner", "coordinator", "coder", "coder", "planner"]
    assert "Executed Results:\n18" in t.steps[3].observation
    assert t.final_answer.endswith("Answer: 18") and t.verdict.success is True
    # the workers' prompts are the math ones (prompts/owl_*.j2 render per task kind)
    request = env["gateway"].calls(t.recording.gateway_run_id)[2].request
    assert "math problem" in request["messages"][0]["content"]


def test_an_episode_cut_by_its_time_limit_is_kept_as_a_failure_with_the_steps_it_made(env, docker_sandbox):
    """The reviewer never answers within the episode's 60 s (as the 0.5B's workforce on GSM8K ran into its limit and
    was lost, "timed out without a trajectory"): the driver reports the workforce's steps made so far before the
    sandbox's limit, and the run is a failure for the time limit, kept, not retried and dropped."""
    import time

    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier
    from rootstep.gateway import register_script

    register_script("owl-test-reviewer-asleep", lambda m, p: (time.sleep(70), "fine")[1])
    adapter = get_adapter("owl", gateway=env["server"], verifier=default_verifier(docker_sandbox), timeout_s=60)
    t = adapter.run(add_task(), "scripted/owl-test-planner",
                    agent_models={**_models("good"), "reviewer": "scripted/owl-test-reviewer-asleep"})
    assert t.verdict.success is False and t.verdict.details == {"failure": "time limit", "time_limit_s": 60.0}
    assert t.metadata["error"] == "time limit: the episode was cut after 60 s"
    made = [(s.agent, s.metadata.get("action")) for s in t.steps]
    assert made[:3] == [("user", None), ("planner", "decompose"), ("coordinator", "assign")]
    assert ("coder", "process_task") in made and ("reviewer", "process_task") not in made
