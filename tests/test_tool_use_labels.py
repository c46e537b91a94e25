"""Counterfactual search on a real multi-turn tool-use failure: AG2 on BFCL multi_turn_base_118 with the local 1.5B
as planner and caller (tests/fixtures/real_runs/ag2_bfcl_multi_turn_base_118.json). At user turn 1 ("take the first
one off my watchlist") the caller answered "Got it! Removed NVDA from the watchlist." without calling anything
(step 7): BFCL's checker fails the run at turn 1, and no later step can change that turn's check.

The 1.5B analyzer's real ranked answer named step 12, in turn 3 (tests/fixtures/analyzer_replies); it is refused
and re-asked. A fix that makes the call the caller should have made (`suggested_tool_calls`) is the label, found
with every earlier agent step of the failing turn and before asked, and nothing after it replayed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.annotation._propose import failure_horizon
from rootstep.gateway import Chat, register_script
from rootstep.model import Intervention, Step, Task, Trajectory, Usage, Verdict
from rootstep.prompts import render_steps

FIXTURES = Path(__file__).parent / "fixtures"
CALL = {"name": "remove_stock_from_watchlist", "arguments": {"symbol": "NVDA"}}


def real_run() -> Trajectory:
    data = json.loads((FIXTURES / "real_runs" / "ag2_bfcl_multi_turn_base_118.json").read_text())
    task = Task.model_validate(data["task"])
    steps = [Step.model_validate({**s, "call_ids": [f"c{s['index']}"] if s["kind"] == "agent" else []})
             for s in data["steps"]]
    return Trajectory(framework="ag2", benchmark="bfcl", task_id=task.task_id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer=data["final_answer"],
                      verdict=Verdict.model_validate(data["verdict"]))


def replay(run: Trajectory, replays: list[Intervention]):
    """The team after an intervention: the run passes turn 1 only when step 7 makes the call it should have made."""

    def fn(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replays.append(intervention)
        ok = intervention.step == 7 and CALL["name"] in json.dumps(intervention.tool_calls or [])
        verdict = Verdict(success=ok, details={"check": "all turns"} if ok else dict(run.verdict.details))
        return (run.model_copy(update={"verdict": verdict, "parent_run_id": run.id}), verdict,
                ReplayOutcome(cost=Usage(llm_calls=3, replayed_calls=4)))

    return fn


def test_the_failing_turn_bounds_the_candidates_of_a_real_bfcl_failure():
    run = real_run()
    assert run.verdict.details["turn"] == 1 and run.verdict.details["check"] == "no calls"
    assert [(s.index, s.agent, s.metadata["turn"]) for s in run.steps if s.kind == "human"][:3] == [
        (0, "executor", 0), (5, "executor", 1), (8, "executor", 2)]
    assert failure_horizon(run, run.verdict) == 8
    rendered = {s["index"]: s for s in render_steps(run, compact=True)[0]}
    # the caller acts through tool calls: each of its steps may be given calls, step 7's too (it made none)
    assert [i for i, s in rendered.items() if s["calls_tools"]] == [s.index for s in run.steps if s.agent == "caller"]
    assert rendered[7]["tool_calls"] == [] and "Removed NVDA" in rendered[7]["content"]


def test_the_1_5bs_proposal_after_the_failing_turn_is_refused_and_the_missing_call_is_the_label():
    run = real_run()
    real = json.loads((FIXTURES / "analyzer_replies" / "bfcl_after_failure.json").read_text())["ranked_after_the_failing_turn"]
    fix = json.dumps({"mistake_step": 7, "mistake_agent": "caller", "reason": "it said it removed NVDA but made no call",
                      "suggested_fix": "", "suggested_tool_calls": [CALL]})
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        if re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompts[-1]):
            return json.dumps({"fix_needed": False, "reason": "this step is right"})
        return real if len(prompts) == 1 else fix

    register_script("bfcl-analyzer", analyzer)
    replays: list[Intervention] = []
    result = find_decisive_step(run, analyzer=Chat("scripted/bfcl-analyzer"), replay=replay(run, replays),
                                budget=Budget())
    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step, a.earliest) == ("labelled", True, "caller", 7, "established")
    assert "step 12 is in user turn 3, after the turn at which the run failed" in prompts[1]
    assert "makes a call the step should have made" in prompts[0] and "suggested_tool_calls" in prompts[0]
    assert "[] removes them.\nA fix must change" in prompts[0]  # the paragraph ends its line
    assert "it failed at user turn 1 (0-based), whose last step is step 7." in prompts[0]
    assert sorted((i.step, i.kind) for i in replays) == [(7, "control"), (7, "fix")]  # nothing after turn 1 replayed
    assert next(i for i in replays if i.kind == "fix").tool_calls == [CALL]
    asked = [int(m.group(1)) for p in prompts if (m := re.search(r"STEP UNDER EXAMINATION: step (\d+)", p))]
    assert asked == [1, 2, 4, 6]  # every earlier agent step asked (and judged correct), none after the label


def test_the_1_5bs_calls_written_in_suggested_fix_are_read_as_calls_and_a_repeated_call_is_refused():
    """The 1.5B put the step's call in `suggested_fix` (as `{"name", "arguments"}` on base_17, in the OpenAI form on
    base_118's step 2), where a text was expected, and its re-asks repeated it: read as `suggested_tool_calls`. On
    base_118 that call is the one step 2 already made: refused as a no-op, not replayed."""
    from rootstep.annotation._propose import plain_tool_calls, validate_diagnosis

    run = real_run()
    replies = json.loads((FIXTURES / "analyzer_replies" / "bfcl_after_failure.json").read_text())
    found, problem = validate_diagnosis(run, replies["step_2_same_call_in_fix"], expect_step=2, may_decline=True)
    assert found is None and problem == ("the fix makes the calls step 2 already made, with the same arguments; a "
                                         "correction must change what the step calls or with which arguments")
    assert plain_tool_calls(run.steps[2].tool_calls) == [{"name": "get_watchlist", "arguments": {}}]
    # base_17's answer names step 7 of its own run; asked of this run's caller step 7, the calls are read
    answer = json.loads(replies["calls_in_fix_after_the_failing_turn"])
    found, problem = validate_diagnosis(run, json.dumps(answer), horizon=None)
    assert problem is None and (found.step, found.fix) == (7, "")
    assert found.tool_calls == [{"name": "find", "arguments": {"path": "project", "name": "test_report.docx"}}]
    # an object naming an agent, or wrapping text, is not a call
    assert plain_tool_calls({"name": "caller"}) is None and plain_tool_calls({"code": "print(1)"}) is None
    assert plain_tool_calls([{"function": {"name": "ls", "arguments": "{\"a\": true}"}}]) == [
        {"name": "ls", "arguments": {"a": True}}]


def later_failure(run: Trajectory, replays: list[Intervention], *, fix_turn: int, control_turn: int):
    """The team after an intervention when the run has further, independent errors: the right call at step 7 gets
    it past turn 1, and the 1.5B caller's later mistakes fail it at `fix_turn`; a control fails at `control_turn`."""

    def fn(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replays.append(intervention)
        fixed = intervention.step == 7 and CALL["name"] in json.dumps(intervention.tool_calls or [])
        turn = fix_turn if fixed else control_turn if intervention.kind == "control" else 1
        verdict = Verdict(success=False, details={"check": "state", "turn": turn})
        return (run.model_copy(update={"verdict": verdict, "parent_run_id": run.id}), verdict,
                ReplayOutcome(cost=Usage(llm_calls=3, replayed_calls=4)))

    return fn


def step_7_analyzer(name: str) -> Chat:
    fix = json.dumps({"mistake_step": 7, "mistake_agent": "caller", "reason": "it said it removed NVDA but made no call",
                      "suggested_fix": "", "suggested_tool_calls": [CALL]})

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        if "STEP UNDER EXAMINATION" in messages[-1]["content"]:
            return json.dumps({"fix_needed": False, "reason": "this step is right"})
        return fix

    register_script(name, analyzer)
    return Chat(f"scripted/{name}")


def test_a_fix_that_gets_a_multi_turn_run_past_its_failing_turn_labels_the_first_failure():
    """Seen with a capable analyzer on base_118 (bench/RESULTS.md): the right call at step 7 got the replay past
    turn 1, and the 1.5B caller failed a later turn on another error. No single fix makes such a run succeed; the
    first failure's decisive error is the label, when the control still fails at the turn (and is kept as such)."""
    run = real_run()
    replays: list[Intervention] = []
    result = find_decisive_step(run, analyzer=step_7_analyzer("bfcl-turn-flip"),
                                replay=later_failure(run, replays, fix_turn=3, control_turn=1), budget=Budget())
    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step, a.earliest, a.fixed_turn) == (
        "labelled", True, "caller", 7, "established", 1)
    assert a.flip_check.flips == 1 and a.flip_check.control_flips == 0 and a.flip_check.control_trials == 1
    assert any("got the run past user turn 1, where it failed; the replay failed later, at turn 3" in n
               for n in a.evidence.notes), a.evidence.notes
    assert any(n.startswith("step 7 (caller") and "got past turn 1, failed at turn 3" in n for n in a.evidence.notes)
    assert result.attempts[0].said is None and not result.attempts[0].repeated


def test_a_control_that_gets_past_the_failing_turn_too_makes_the_turn_flip_a_re_roll():
    run = real_run()
    replays: list[Intervention] = []
    result = find_decisive_step(run, analyzer=step_7_analyzer("bfcl-turn-reroll"),
                                replay=later_failure(run, replays, fix_turn=3, control_turn=2), budget=Budget())
    a = result.annotation
    assert (a.status, a.verified, a.step, a.fixed_turn) == ("not_causal", False, 7, None)
    assert "re-roll" in a.evidence.reason


def test_a_fix_whose_replay_fails_at_the_same_turn_or_earlier_flips_nothing():
    run = real_run()
    for turn in (1, 0):
        replays: list[Intervention] = []
        result = find_decisive_step(run, analyzer=step_7_analyzer(f"bfcl-no-flip-{turn}"),
                                    replay=later_failure(run, replays, fix_turn=turn, control_turn=1), budget=Budget())
        assert result.annotation.status == "unresolved" and result.annotation.fixed_turn is None
        assert result.attempts and all(x.later_turn is None and not x.turned for x in result.attempts)
        assert result.attempts[0].said is not None  # a failed fix is shown to the analyzer with what it ended with


def test_a_multi_turn_failure_is_replayed_up_to_its_failing_turn_and_the_label_says_the_replay_stopped():
    from rootstep.flows._searches import replay_options

    run = real_run()
    assert replay_options(run) == {"until_turn": 1}
    assert replay_options(run.model_copy(update={"verdict": Verdict(success=True)})) == {}
    assert replay_options(run.model_copy(update={"verdict": Verdict(success=False, details={"check": "answer"})})) == {}

    def stopped(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        """What `Adapter.replay(until_turn=1)` gives: a replay that passed turn 1 ends there."""
        fixed = intervention.step == 7 and CALL["name"] in json.dumps(intervention.tool_calls or [])
        details = ({"check": "turns", "turn": 2, "stopped_after_turn": 1} if fixed
                   else {"check": "no calls", "turn": 1})
        verdict = Verdict(success=False, details=details)
        return (run.model_copy(update={"verdict": verdict, "parent_run_id": run.id}), verdict,
                ReplayOutcome(cost=Usage(llm_calls=2, replayed_calls=4)))

    result = find_decisive_step(run, analyzer=step_7_analyzer("bfcl-stopped"), replay=stopped, budget=Budget())
    a = result.annotation
    assert (a.status, a.step, a.fixed_turn, result.attempts[0].stopped_after_turn) == ("labelled", 7, 1, 1)
    assert any("the replay was stopped there (later turns are not replayed)" in n for n in a.evidence.notes)
    assert any(n.startswith("step 7 (caller") and "got past turn 1 [" in n for n in a.evidence.notes), a.evidence.notes


def offered_tools() -> list[dict[str, Any]]:
    """The task's functions as the OpenAI tools the caller's requests offered (name and parameters)."""
    data = json.loads((FIXTURES / "real_runs" / "ag2_bfcl_multi_turn_base_118.json").read_text())
    return [{"type": "function", "function": {"name": d["name"], "parameters": d["parameters"]}}
            for d in data["task"]["metadata"]["functions"]]


def test_calls_written_as_text_are_read_as_calls_of_the_offered_tools_and_nothing_else_is():
    """`written_calls` on what the local models wrote where a call was due (the golden cells' replies, and the 1.5B
    analyzer's fix on AFlow base_146): only a text that is nothing but literal calls of offered functions is calls."""
    from rootstep.annotation._propose import written_calls

    tools = offered_tools()
    files = [{"name": "pwd", "parameters": {"type": "dict", "properties": {}}},
             {"name": "cd", "parameters": {"type": "dict", "properties": {"folder": {"type": "string"}}}},
             {"name": "ls", "parameters": {"type": "dict", "properties": {"a": {"type": "boolean"}}}},
             {"name": "find", "parameters": {"type": "dict", "properties": {"path": {"type": "string"},
                                                                            "name": {"type": "string"}}}}]
    assert written_calls('remove_stock_from_watchlist("ZETA")', tools) == [
        {"name": "remove_stock_from_watchlist", "arguments": {"symbol": "ZETA"}}]
    assert written_calls("pwd()", files) == [{"name": "pwd", "arguments": {}}]  # AFlow's caller, base_28
    assert written_calls("```python\n1. pwd()\n2. find(path='.', name='analysis');\n```", files) == [
        {"name": "pwd", "arguments": {}}, {"name": "find", "arguments": {"path": ".", "name": "analysis"}}]
    assert written_calls("`find('.', name='analysis')`", files) == [
        {"name": "find", "arguments": {"path": ".", "name": "analysis"}}]
    refused = [
        "To navigate to the \"analysis\" directory, use the command `cd(analysis)`.",  # AG2's caller, base_28: prose
        "1. cd(current_directory)\n2. ls()",  # AgentPrune's decision node, base_28: not a literal
        "pwd() - /home/user\nls() - ['analysis.txt', 'data.csv', 'report.pdf']",  # AFlow's caller: invented results
        "<tool_response>\n{\"current_working_directory\": \"/workspace\"}\n</tool_response>",  # MetaGPT's caller
        "grep(analysis)",  # not a literal
        "rm(file_name='a.txt')",  # not offered
        "find('.', 'analysis', 'x')",  # more arguments than parameters
        "find('.', path='x')",  # a parameter given twice
        "ls(all=True)",  # no such parameter
        "",
    ]
    assert [written_calls(text, files) for text in refused] == [None] * len(refused)
    assert written_calls("pwd()", []) is None


def test_a_fix_that_writes_the_missing_call_as_text_is_the_call_at_a_step_that_had_tools():
    """The 1.5B analyzer's fix on AFlow base_146 (2026-11-29) was the caller's call written as text: refused as the
    step unchanged there, so the right step was never replayed. Given the tools the step's request offered, it is
    replayed as the call and is the label; at the planner's step (no tools) the same text stays a message."""
    run = real_run()
    tools = offered_tools()
    as_text = 'remove_stock_from_watchlist("NVDA")'

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        asked = re.search(r"STEP UNDER EXAMINATION: step (\d+)", messages[-1]["content"])
        if asked:
            return json.dumps({"fix_needed": False, "reason": "this step is right"})
        return json.dumps({"mistake_step": 7, "mistake_agent": "caller", "reason": "no call was made",
                           "suggested_fix": as_text})

    register_script("bfcl-analyzer-text-call", analyzer)
    replays: list[Intervention] = []
    result = find_decisive_step(run, analyzer=Chat("scripted/bfcl-analyzer-text-call"), replay=replay(run, replays),
                                budget=Budget(), step_tools=lambda step: tools if step.agent == "caller" else None)
    a = result.annotation
    assert (a.status, a.agent, a.step, a.earliest) == ("labelled", "caller", 7, "established")
    fixes = [i for i in replays if i.kind == "fix"]
    assert [(i.step, i.new_content, i.tool_calls) for i in fixes] == [(7, "", [CALL])]

    from rootstep.annotation._propose import validate_diagnosis

    at_planner = json.dumps({"mistake_step": 6, "mistake_agent": "planner", "suggested_fix": as_text + "\n2. get_watchlist()"})
    found, problem = validate_diagnosis(run, at_planner, read_calls=lambda step, text: None)
    assert problem is None and found.tool_calls is None and found.fix.startswith(as_text)
    # without the step's tools the caller's text fix is a message, as before
    found, problem = validate_diagnosis(run, analyzer([{"content": ""}], {}))
    assert problem is None and (found.fix, found.tool_calls) == (as_text, None)
