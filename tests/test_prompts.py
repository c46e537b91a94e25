"""One renderer of a run into prompt text: the analyzer, the perturber and the attribution methods show a run alike."""

from __future__ import annotations

from rootstep.annotation import Budget, find_decisive_step, inject_fault
from rootstep.gateway import register_script
from rootstep.prompts import render, render_steps
from rootstep.tracers import all_at_once, binary_search, step_by_step
from rootstep.model import Intervention, Step, Trajectory, Verdict

CALL = {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}


def _run(success: bool) -> Trajectory:
    return Trajectory(
        framework="ag2", benchmark="gsm8k", task_id="t1", question="What is 6 times 7?", ground_truth="42",
        steps=[
            Step(index=0, agent="planner", content="Multiply 6 by 7 with the calculator."),
            Step(index=1, agent="solver", content="Calling the calculator.", tool_calls=[CALL]),
            Step(index=2, agent="calculator", kind="tool", content="6*7", observation="48"),
            Step(index=3, agent="solver", content="The answer is 48."),
        ],
        final_answer="48", verdict=Verdict(success=success),
    )


def _never_replayed(intervention: Intervention):
    raise AssertionError("the search was given one LLM call: it cannot get as far as a replay")


def test_tool_calls_and_observations_read_the_same_to_the_analyzer_the_perturber_and_the_tracers():
    failed = _run(success=False)
    block = render("_run.j2", steps=render_steps(failed)[0]).strip()
    assert '[step 1] solver:\nCalling the calculator.\n  tool call: {"function": {"arguments": "{\\"expression\\": \\"6*7\\"}"' in block
    assert "[step 2] calculator (tool step):\n6*7\n  observation: 48\n[step 3] solver:" in block

    asked: list[str] = []

    def chat(prompt: str) -> str:
        asked.append(prompt)
        return "not an answer"

    find_decisive_step(failed, analyzer=chat, replay=_never_replayed, budget=Budget(max_llm_calls=1))
    inject_fault(_run(success=True), perturber=chat, replay=_never_replayed, budget=Budget(max_llm_calls=1),
                 programmatic=False)
    register_script("prompt-capture", lambda messages, params: asked.append(messages[-1]["content"]) or "no idea")
    all_at_once(failed, model="scripted/prompt-capture")
    step_by_step(failed, model="scripted/prompt-capture")
    binary_search(failed, model="scripted/prompt-capture")
    analyzer, perturber, *tracers = asked
    assert analyzer.startswith("You are the analyzer") and perturber.startswith("You are the perturber")
    assert "THE RUN (steps are numbered from 0):\n" + block in analyzer and block in perturber
    assert "THE RUN (steps are numbered from 0):\n" + block in tracers[0]  # all-at-once
    assert "THE RUN SO FAR (steps are numbered from 0):\n" + block in tracers[3]  # step-by-step, asked of step 3
    assert "STEPS 0 TO 3 OF THE RUN:\n" + block in tracers[4]  # binary search, its first question
    assert len(tracers) == 5

def test_observations_share_the_budget_and_short_texts_stay_whole():
    long = "y" * 5000
    t = Trajectory(framework="f", benchmark="b", task_id="t", steps=[
        Step(index=0, agent="a", content="short"),
        Step(index=1, agent="tool", kind="tool", content="run it", observation=long),
        Step(index=2, agent="a", content=long)])
    steps, truncated = render_steps(t, max_prompt_chars=2000)
    assert truncated and [s["content"] for s in steps[:2]] == ["short", "run it"]
    assert len(steps[1]["observation"]) < 1100 and len(steps[2]["content"]) < 1100  # the two long texts split what is left
    assert "characters cut" in steps[1]["observation"] and "characters cut" in steps[2]["content"]
    assert render_steps(t, 1, 1, max_prompt_chars=100_000) == ([{
        "index": 1, "agent": "tool", "kind": "tool", "content": "run it", "tool_calls": [], "calls_tools": False,
        "observation": long, "reads": None}], False)


def test_who_reads_whom_is_shown_only_where_the_agents_do_not_share_one_chat():
    """AgentPrune's steps carry the steps their agent was shown (`Step.metadata["reads"]`): the run's text
    marks them and the analyzer's prompt explains them; a shared chat's prompt is unchanged."""
    from rootstep.prompts import render

    steps = [Step(index=0, agent="user", kind="human", content="How many?"),
             Step(index=1, agent="math_solver", content="120", metadata={"reads": [0]}),
             Step(index=2, agent="analyst", content="120", metadata={"reads": [0]}),
             Step(index=3, agent="decision", content="Answer: 120", metadata={"reads": [0, 1, 2]})]
    graph = Trajectory(framework="agentprune", benchmark="gsm8k", task_id="t", steps=steps)
    chat = graph.model_copy(update={"steps": [s.model_copy(update={"metadata": {}}) for s in steps]})
    common = dict(question="How many?", ground_truth="2", feedback="wrong", agents=["math_solver"], failed=[],
                  previous_answer=None, problem=None)
    shown = render("analyzer.j2", **common, steps=render_steps(graph)[0])
    assert "[step 2] analyst (saw only steps 0):" in shown and "[step 3] decision (saw only steps 0, 1, 2):" in shown
    assert "WHO READS WHOM" in shown
    plain = render("analyzer.j2", **common, steps=render_steps(chat)[0])
    assert "saw only" not in plain and "WHO READS WHOM" not in plain and "[step 2] analyst:" in plain


def test_the_perturber_is_told_when_the_visible_examples_are_the_tests_that_decide():
    """Plain MBPP's tests are the 3 asserts of its prompt: the perturber was told "its code must still pass
    these" and that the tests cover more, so a careful (hand-answered) perturber declined every MBPP step.
    MBPP+ (hundreds of hidden inputs) keeps the old wording."""
    from rootstep.annotation._injection import _team_view
    from rootstep.benchmarks import load_tasks
    from rootstep.prompts import render
    from rootstep.model import Verdict

    task = next(t for t in load_tasks("mbpp") if t.task_id == "66")
    run = Trajectory(framework="ag2", benchmark="mbpp", task_id="66", steps=[
        Step(index=0, agent="user", kind="human", content=task.prompt),
        Step(index=1, agent="coder", content="```python\ndef pos_count(xs):\n    return sum(1 for x in xs if x > 0)\n```"),
        Step(index=2, agent="executor", kind="tool", content="exit code: 0")])
    common = dict(question=task.prompt, ground_truth=None, steps=render_steps(run)[0], agents=["coder"],
                  step=render_steps(run)[0][1], persistent=False, previous_answer=None, problem=None)
    same = _team_view(run, run.steps[1], task, Verdict(success=True, details={"passed": 3, "total": 3}))
    assert same["tests_are_visible"] is True and "exactly the 3 visible examples" in same["omega"]
    shown = render("perturber_at_step.j2", **common, team=same)
    assert "are the very tests that decide success" in shown and "must still pass these" not in shown
    more = _team_view(run, run.steps[1], task, Verdict(success=True, details={"passed": 99, "total": 99}))
    assert more["tests_are_visible"] is False and "inputs the visible examples do not show" in more["omega"]
    assert "its code must still pass these" in render("perturber_at_step.j2", **common, team=more)
