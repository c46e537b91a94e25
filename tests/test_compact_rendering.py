"""The analyzer's and perturber's compact view of a run (`render_steps(compact=True)`) and the prefix every prompt
of a search shares byte for byte (`_analyzer_head.j2`), on a real AG2 run of the local 0.5B whose coder and critic
restate one code block (tests/fixtures/real_runs/ag2_gsm8k_test-120.json, the main job of 2026-11-25)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.benchmarks import verify
from rootstep.gateway import register_script
from rootstep.prompts import MAX_OUTPUT_CHARS, render, render_steps
from rootstep.gateway import Chat
from rootstep.model import Intervention, Recording, Step, Task, Trajectory, Verdict

FIXTURE = Path(__file__).parent / "fixtures" / "real_runs" / "ag2_gsm8k_test-120.json"


def _real_run() -> Trajectory:
    data = json.loads(FIXTURE.read_text())
    task = Task.model_validate(data["task"])
    steps = [Step.model_validate({**s, "call_ids": [f"c{s['index']}"] if s["kind"] == "agent" else []})
             for s in data["steps"]]
    return Trajectory(framework="ag2", benchmark=task.benchmark, task_id=task.task_id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer=data["final_answer"],
                      verdict=verify(task, data["final_answer"]), recording=Recording(gateway_run_id="real", task=task))


def test_repeated_messages_and_code_blocks_are_shown_once_with_their_step_numbers():
    run = _real_run()
    whole, _ = render_steps(run)
    compact, _ = render_steps(run, compact=True)
    shown = {s["index"]: s["content"] for s in compact}
    assert [s["index"] for s in compact] == [s.index for s in run.steps]  # every step keeps its number
    assert shown[0] == "[the task, as given above]"  # step 0 is the task the prompt already states
    assert run.steps[4].content == run.steps[3].content and shown[4] == "[the same message as step 3]"
    assert shown[9] == shown[10] == "[the same message as step 3]"
    assert shown[8] == "[the same message as step 2]"
    assert shown[3] == run.steps[3].content  # a first occurrence is shown whole
    assert all(s["full"] == run.steps[s["index"]].content for s in compact)  # for the prompt about that step
    assert sum(len(s["content"]) for s in compact) < 0.7 * sum(len(s["content"]) for s in whole)


def test_a_repeated_code_block_inside_another_message_and_a_long_output_are_shortened():
    block = "```python\n" + "\n".join(f"x_{i} = {i} * 3  # part {i}" for i in range(8)) + "\nprint(x_7)\n```"
    log = "Traceback (most recent call last):\n" + "  File \"x.py\", line 3\n" * 200 + "ValueError: bad input"
    run = Trajectory(framework="f", benchmark="b", task_id="t", question="q", steps=[
        Step(index=0, agent="coder", content=f"My program:\n{block}\nAnswer: 21"),
        Step(index=1, agent="executor", kind="tool", content=log, observation=log),
        Step(index=2, agent="critic", content=f"The coder wrote\n{block}\nwhich prints 21; the task asks for 22."),
        Step(index=3, agent="coder", content="ok"),
        Step(index=4, agent="critic", content="ok"),  # short repeats are shown again, not referenced
    ])
    shown = {s["index"]: s for s in render_steps(run, compact=True)[0]}
    assert shown[2]["content"] == ("The coder wrote\n```\n[the same code as in step 0]\n```\n"
                                   "which prints 21; the task asks for 22.")
    assert len(shown[1]["content"]) < MAX_OUTPUT_CHARS + 100 and "characters cut" in shown[1]["content"]
    assert shown[1]["content"].endswith("ValueError: bad input")  # the tail of a traceback says what failed
    assert len(shown[1]["observation"]) < MAX_OUTPUT_CHARS + 100
    assert shown[4]["content"] == "ok"
    assert render_steps(run)[0][2]["content"] == run.steps[2].content  # the tracers' view is unchanged


def test_every_analyzer_prompt_of_a_search_shares_the_run_byte_for_byte_and_asks_about_a_step_whole():
    run = _real_run()
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        if len(prompts) == 1:
            return json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "30 pads, not 2 a week",
                               "suggested_fix": "```python\nprint(2 * 30 * 4)\n```\nAnswer: 240"})
        return json.dumps({"fix_needed": False, "reason": "it repeats the run's code"})

    register_script("compact-analyzer", analyzer)

    def still_fails(intervention: Intervention):
        return run, Verdict(success=False), ReplayOutcome()

    find_decisive_step(run, analyzer=Chat("scripted/compact-analyzer"), replay=still_fails, budget=Budget(max_reasks=0))
    assert len(prompts) >= 4  # the ranked diagnosis, then the earlier steps one by one
    head = render("_analyzer_head.j2", question=run.question, ground_truth=run.ground_truth,
                  feedback=prompts[0].split("ENVIRONMENT FEEDBACK (the verifier's verdict on the run):\n")[1]
                  .split("\n\nAGENTS:")[0], agents=run.agents,
                  steps=render_steps(run, max_prompt_chars=24_000, compact=True)[0]).rstrip("\n")
    assert all(p.startswith(head) for p in prompts), "a search's prompts must share the run as their prefix"
    assert len(os.path.commonprefix(prompts)) >= len(head)
    asked_4 = next(p for p in prompts if "STEP UNDER EXAMINATION: step 4 " in p)
    # the run shows step 4 as a reference; the question about step 4 shows it whole
    assert "[step 4] coder:\n[the same message as step 3]" in asked_4
    assert asked_4.split("STEP UNDER EXAMINATION: step 4 by coder:\n")[1].startswith(run.steps[4].content)


def _scan_prompts(name: str, fix_each_step: bool) -> tuple[Trajectory, list[str]]:
    """The analyzer's prompts of a search on the real run whose every fix fails: the ranked diagnosis (step 1),
    then the earlier-steps scan, where the analyzer either judges each step correct or fixes it."""
    run = _real_run()
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompt = messages[-1]["content"]
        prompts.append(prompt)
        if "STEP UNDER EXAMINATION" not in prompt:
            return json.dumps({"mistake_step": 1, "mistake_agent": "coder", "reason": "30 pads, not 2 a week",
                               "suggested_fix": "```python\nprint(2 * 30 * 4)\n```\nAnswer: 240"})
        step = int(prompt.split("STEP UNDER EXAMINATION: step ", 1)[1].split(" ", 1)[0])
        if not fix_each_step:
            return json.dumps({"fix_needed": False, "reason": "it follows from the steps before it"})
        return json.dumps({"fix_needed": True, "mistake_step": step, "mistake_agent": run.steps[step].agent,
                           "reason": "the count is wrong", "suggested_fix": f"```python\nprint({step} * 60)\n```"})

    register_script(name, analyzer)

    def still_fails(intervention: Intervention):
        return run, Verdict(success=False), ReplayOutcome()

    find_decisive_step(run, analyzer=Chat(f"scripted/{name}"), replay=still_fails, budget=Budget(max_reasks=0))
    return run, prompts


def test_the_scans_prompts_share_everything_but_the_step_under_examination():
    """A local model's prompt cache serves what a call shares with an earlier one, from the start: the scan's
    prompts (one per agent step) differ only from the step under examination on, so each re-reads that step and
    its question, not the run and the corrections tested (measured: bench/local_model.py --sections order)."""
    _, prompts = _scan_prompts("order-declines", fix_each_step=False)
    scan = [p for p in prompts if "STEP UNDER EXAMINATION" in p]
    assert len(scan) >= 3
    for p, q in zip(scan, scan[1:]):
        shared = len(os.path.commonprefix([p, q]))
        assert shared >= p.index("STEP UNDER EXAMINATION"), p[shared - 200: shared + 200]
        assert p.index("CORRECTIONS ALREADY TESTED") < p.index("You will be asked about one agent step") < p.index(
            "STEP UNDER EXAMINATION")
    # the ranked prompt, the first of the search, shares the same run and is asked in the same words
    assert "CORRECTIONS ALREADY TESTED" not in prompts[0] and "STEP UNDER EXAMINATION" not in prompts[0]


def test_a_correction_tested_between_two_calls_is_appended_to_what_they_share():
    """The tested list only grows, in the order the search replayed: the next call's prompt starts with all of the
    previous call's list, so a replay costs the next call only its new entry."""
    _, prompts = _scan_prompts("order-fixes", fix_each_step=True)
    scan = [p for p in prompts if "STEP UNDER EXAMINATION" in p]
    assert len(scan) >= 3
    lists = [p[: p.index("\nYou will be asked about one agent step")] for p in scan]
    assert [lst.count("\n- step ") for lst in lists] == sorted(lst.count("\n- step ") for lst in lists)
    assert lists[-1].count("\n- step ") > lists[0].count("\n- step ")
    for p, q in zip(lists, scan[1:]):
        assert q.startswith(p), "a later call must extend the earlier call's tested list, not rewrite it"
