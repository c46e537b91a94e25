"""AFlow (operator workflows, reimplemented) run for real inside its sandbox image, scripted LLM answers
through the in-process gateway: a coding run that succeeds, one that fails, an exact replay, interventions
that flip it, a math run (Programmer retried after an error) and a QA run. Plus the visible-test extraction."""

from __future__ import annotations

import pytest

from rootstep.model import Intervention, Task

from ._adapter_support import (
    add_task, assert_calls_linked_one_per_agent_step, assert_exact_replay, last_message_text, reply_when,
    scripted_env,
)

docker = pytest.mark.docker

RIGHT = "Here is the solution.\n```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "Here is the solution.\n```python\ndef add(a, b):\n    return a - b\n```"
PICK_A = "<thought>A is the simplest.</thought>\n<solution_letter>A</solution_letter>"
PICK_B = "<thought>Only B returns 3 for add(1, 2), as the task's tests require.</thought>\n<solution_letter>B</solution_letter>"


_custom_mixed = reply_when("Approach 2 of 3", RIGHT, WRONG)  # three candidates: only the second writes a + b


def _careless_fixer(messages, params):
    """Says it fixed the failing tests, and hands the same wrong code back."""
    assert "FAILED: assert add(1, 2) == 3" in last_message_text(messages)
    return "The test failure must be a typo in the tests.\n" + WRONG.split("\n", 1)[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    yield from scripted_env("aflow", tmp_path_factory, docker_sandbox, {
        "aflow-test-custom-right": lambda m, p: RIGHT, "aflow-test-custom-mixed": _custom_mixed,
        "aflow-test-pick-a": lambda m, p: PICK_A, "aflow-test-fixer": _careless_fixer})


@pytest.fixture(scope="module")
def failed(env):
    return env["adapter"].run(add_task(), "scripted/aflow-test-custom-mixed",
                              agent_models={"sc_ensemble": "scripted/aflow-test-pick-a", "test": "scripted/aflow-test-fixer"})


# ---------------------------------------------------------------------- no Docker needed


def test_visible_tests_come_from_the_prompt_only():
    from rootstep.benchmarks import visible_tests

    assert visible_tests(add_task()) == ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]
    humaneval = Task(
        benchmark="humaneval", task_id="HumanEval/x", kind="coding", verifier="code_tests",
        prompt='def f(xs, s):\n    """Doubles.\n    >>> f([1, 2], "a")  # a comment\n    [2, 4]\n    >>> g = 3\n'
               '    >>> f([g], "\\n") == [6]\n    >>> f([], "")\n    []\n    """\n',
        metadata={"harness": "humaneval", "entry_point": "f", "test": "def check(c): assert False"},
    )
    # the doctest outputs become asserts (comments dropped, the docstring's closing quotes not part of the
    # output), an example without output that is a comparison is asserted, a statement is set-up; the
    # hidden `check` is never used
    assert visible_tests(humaneval) == [
        "assert f([1, 2], 'a') == [2, 4]", "g = 3\nassert f([g], '\\n') == [6]", "g = 3\nassert f([], '') == []"]
    assert visible_tests(Task(benchmark="gsm8k", task_id="t", kind="math", verifier="numeric", prompt="2 + 2?")) == []


def test_episode_config_renders_one_prompt_per_candidate():
    from rootstep.adapters import get_adapter

    adapter = get_adapter("aflow", candidates=2)
    config = adapter.episode_config(add_task())
    assert config["workflow"] == "coding" and config["candidates"] == 2 and config["entry_point"] == "add"
    assert len(config["prompts"]["custom"]) == 2
    assert "Approach 1 of 2" in config["prompts"]["custom"][0] and "Approach 2 of 2" in config["prompts"]["custom"][1]
    assert "${problem}" in config["prompts"]["custom"][0] and "${solutions}" in config["prompts"]["sc_ensemble"]
    qa = Task(benchmark="hotpotqa", task_id="q", kind="qa", verifier="qa", ground_truth="x", prompt="Who?",
              metadata={"paragraphs": [{"title": "T", "sentences": ["One.", " Two."]}]})
    assert adapter.episode_config(qa)["problem"].endswith("[1] T: One. Two.")
    with pytest.raises(ValueError, match="runs coding, math, qa tasks"):
        adapter.run(Task(benchmark="gaia", task_id="g", kind="agentic", verifier="gaia", prompt="?"), "scripted/x")


# ---------------------------------------------------------------------- the framework in Docker


@docker
def test_coding_task_succeeds(env):
    t = env["adapter"].run(add_task(), "scripted/aflow-test-custom-right",
                           agent_models={"sc_ensemble": "scripted/aflow-test-pick-a"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert t.framework == "aflow" and t.recording.framework_version == "2.54.0"
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("user", "human"), ("custom", "agent"), ("custom", "agent"), ("custom", "agent"),
        ("sc_ensemble", "agent"), ("test", "tool")]
    assert t.steps[5].content == "Visible tests: 3 run, 3 passed, 0 failed."
    assert t.steps[5].tool_calls[0]["arguments"]["tests"][0] == "assert add(1, 2) == 3"
    assert t.steps[4].metadata["chosen"] == "A"
    assert "return a + b" in t.final_answer and t.final_answer.startswith("```python")
    assert t.verdict.success and t.verdict.details["passed"] == 3
    calls = assert_calls_linked_one_per_agent_step(t, env["gateway"], n_calls=4)
    # the ensemble saw the three candidates, lettered
    ensemble = calls[t.steps[4].call_ids[0]].request["messages"][-1]["content"]
    assert "A:\n```python" in ensemble and "C:\n```python" in ensemble and "D:" not in ensemble


@docker
def test_coding_task_fails(failed):
    assert "error" not in failed.metadata, failed.metadata.get("traceback")
    assert [(s.agent, s.kind) for s in failed.steps] == [
        ("user", "human"), ("custom", "agent"), ("custom", "agent"), ("custom", "agent"), ("sc_ensemble", "agent"),
        ("test", "tool"), ("test", "agent"), ("test", "tool"), ("test", "agent"), ("test", "tool"),
        ("test", "agent"), ("test", "tool")]
    assert "return a + b" in failed.steps[2].content  # the right candidate was there ...
    assert failed.steps[4].metadata["chosen"] == "A"  # ... and the ensemble passed it over
    report = failed.steps[5].content
    assert report.startswith("Visible tests: 3 run, 0 passed, 3 failed.")
    assert "FAILED: assert add(1, 2) == 3" in report and "the call returned -1" in report
    assert all(not s.metadata["passed"] for s in failed.steps if s.kind == "tool")
    assert "return a - b" in failed.final_answer
    assert failed.verdict.success is False and failed.verdict.details["passed"] == 0
    assert failed.metadata["llm_calls"] == 7


@docker
def test_exact_replay_reproduces_the_run_with_zero_live_calls(env, failed):
    assert_exact_replay(env, failed, replayed_calls=7)


@docker
def test_intervention_on_the_ensemble_flips_the_outcome(env, failed):
    t = 4  # the ensemble's choice of the wrong candidate: the decisive error
    assert failed.steps[t].agent == "sc_ensemble"
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=PICK_B))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1 and info.replayed_calls == 3
    assert [s.content_key() for s in r.steps[:t]] == [s.content_key() for s in failed.steps[:t]]
    assert r.steps[t].content == PICK_B and r.steps[t].metadata["chosen"] == "B"
    assert [(s.agent, s.kind) for s in r.steps[t + 1:]] == [("test", "tool")]
    assert r.steps[t + 1].content == "Visible tests: 3 run, 3 passed, 0 failed."
    assert info.live_calls == 0  # the tests passed: no fix was asked for
    assert r.verdict.success is True and failed.verdict.success is False


@docker
def test_intervention_on_the_test_reflection_flips_the_outcome(env, failed):
    t = 6  # the first fix the Test operator asked for
    assert (failed.steps[t].agent, failed.steps[t].kind) == ("test", "agent")
    fix = "add(1, 2) returned -1: the function subtracts instead of adding.\n" + RIGHT.split("\n", 1)[1]
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=fix))
    assert r.replay.prefix_identical is True and r.replay.replayed_calls == 4
    assert [(s.agent, s.kind) for s in r.steps[t:]] == [("test", "agent"), ("test", "tool")]
    assert r.steps[t + 1].metadata["passed"] is True
    assert "return a + b" in r.final_answer and r.verdict.success is True


@docker
def test_intervention_on_a_tool_step_is_refused(env, failed):
    with pytest.raises(ValueError, match="only LLM-produced agent steps"):
        env["adapter"].replay(failed, Intervention(run_id=failed.id, step=5, new_content="x"))


@docker
def test_math_task_with_a_programmer_retry(env):
    from rootstep.gateway import register_script

    task = Task(benchmark="gsm8k", task_id="eggs", kind="math", verifier="numeric", ground_truth="18",
                prompt="Janet's ducks lay 16 eggs per day. She eats three and bakes muffins with four. "
                       "She sells the rest at $2 per egg. How many dollars does she make every day?")

    def programmer(messages, params):
        if "did not run successfully" in last_message_text(messages):  # the retry sees the first program's error
            assert "ZeroDivisionError: division by zero" in last_message_text(messages)
            return "```python\ndef solve():\n    return (16 - 3 - 4) * 2\n```"
        return "```python\ndef solve():\n    eggs = 16 - 3 - 4\n    return eggs * 2 / (eggs - 9)\n```"

    register_script("aflow-test-answer", lambda m, p: "<thought>16 - 3 - 4 = 9 eggs, 9 * 2 = 18.</thought>\n<answer>18</answer>")
    register_script("aflow-test-programmer", programmer)
    register_script("aflow-test-pick-d", lambda m, p: "<thought>D computed it.</thought><solution_letter>D</solution_letter>")
    t = env["adapter"].run(task, "scripted/aflow-test-answer", agent_models={
        "programmer": "scripted/aflow-test-programmer", "sc_ensemble": "scripted/aflow-test-pick-d"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert [(s.agent, s.kind) for s in t.steps] == [
        ("user", "human"), ("answer_generate", "agent"), ("answer_generate", "agent"), ("answer_generate", "agent"),
        ("programmer", "agent"), ("programmer", "tool"), ("programmer", "agent"), ("programmer", "tool"),
        ("sc_ensemble", "agent")]
    assert t.steps[5].content.startswith("Status: Error") and "ZeroDivisionError" in t.steps[5].content
    assert t.steps[7].content == "Status: Success\nOutput: 18"
    assert t.steps[1].metadata["answer"] == "18" and t.steps[8].metadata["chosen"] == "D"
    assert t.final_answer == "18" and t.verdict.success is True
    # the programmer's prompt carries the first answer's reasoning as its analysis
    first = env["gateway"].calls(t.recording.gateway_run_id)[3]
    assert first.agent == "programmer" and "9 * 2 = 18" in first.request["messages"][-1]["content"]
    assert env["adapter"].replay(t).replay.identical is True


@docker
def test_qa_task_sees_its_context(env):
    from rootstep.gateway import register_script

    task = Task(benchmark="hotpotqa", task_id="vasa", kind="qa", verifier="qa", ground_truth="Norrström",
                prompt="Which river flows through the capital of the country where the Vasa Museum is?",
                metadata={"paragraphs": [
                    {"title": "Vasa Museum", "sentences": ["The Vasa Museum is a maritime museum in Stockholm, Sweden."]},
                    {"title": "Stockholm", "sentences": ["Stockholm is the capital of Sweden.",
                                                         " The Norrström river flows through the city centre."]}]})

    def reader(messages, params):
        seen = "The Norrström river flows" in last_message_text(messages)
        return f"<thought>The museum is in Stockholm.</thought><answer>{'Norrström' if seen else 'unknown'}</answer>"

    register_script("aflow-test-reader", reader)
    t = env["adapter"].run(task, "scripted/aflow-test-reader", agent_models={"sc_ensemble": "scripted/aflow-test-pick-a"})
    assert [s.agent for s in t.steps] == ["user", "answer_generate", "answer_generate", "answer_generate", "sc_ensemble"]
    assert t.final_answer == "Norrström" and t.verdict.success is True
