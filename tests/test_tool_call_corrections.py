"""A multi-turn tool-use failure's step is corrected with the ground-truth calls of the user turn the run failed at
(`FixProposer.from_calls`, `called`): the tool-use counterpart of the reference solution, tried before the analyzer
is asked (the grounded phase) and in the scan without asking it.

The run is real: AG2 on BFCL multi_turn_base_118 with the local 1.5B as planner and caller
(tests/fixtures/real_runs/ag2_bfcl_multi_turn_base_118.json); at user turn 1 the caller answered "Got it! Removed
NVDA from the watchlist." without calling anything (step 7). The local 1.5B analyzer's real ranked answer on it named
step 12, after the failing turn (tests/fixtures/analyzer_replies/bfcl_after_failure.json); on the 2026-11-29 BFCL
runs it never wrote a call as its fix. Omega is BFCL's own checker (`bfcl_multi_turn`), here and in every replay."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rootstep.annotation import Budget, ReplayOutcome, find_decisive_step
from rootstep.annotation._budget import Meter
from rootstep.annotation._propose import FixProposer, TaskContext
from rootstep.benchmarks import call_key, executed_calls_answer, matching, task_functions, verify
from rootstep.gateway import Chat, register_script
from rootstep.model import Intervention, Recording, Step, Task, Trajectory, Usage, Verdict

FIXTURES = Path(__file__).parent / "fixtures"
DATA = json.loads((FIXTURES / "real_runs" / "ag2_bfcl_multi_turn_base_118.json").read_text())
TASK = Task.model_validate(DATA["task"])
REMOVE = {"name": "remove_stock_from_watchlist", "arguments": {"symbol": "NVDA"}}


def check(task: Task, answer: str | None) -> Verdict:
    return verify(task, answer)


def trajectory(steps: list[Step], final_answer: str | None = None) -> Trajectory:
    answer = executed_calls_answer(steps)
    return Trajectory(framework="ag2", benchmark="bfcl", task_id=TASK.task_id, question=TASK.prompt,
                      ground_truth=TASK.ground_truth, steps=steps, final_answer=final_answer or answer,
                      verdict=check(TASK, answer), recording=Recording(gateway_run_id="real", task=TASK))


def real_run() -> Trajectory:
    steps = [Step.model_validate({**s, "call_ids": [f"c{s['index']}"] if s["kind"] == "agent" else []})
             for s in DATA["steps"]]
    return trajectory(steps, DATA["final_answer"])


def proposer(run: Trajectory, verifier: Any = check) -> FixProposer:
    return FixProposer(run, run.verdict, TaskContext(question=run.question, task=TASK), lambda *a, **k: "",
                       Meter(Budget()), [], [], 24_000, verifier, None, None)


def calls_step(index: int, turn: int, calls: list[dict[str, Any]], text: str = "") -> Step:
    return Step(index=index, agent="caller", content=text, call_ids=[f"c{index}"], metadata={"turn": turn},
                tool_calls=[{"id": f"t{index}{n}", "type": "function",
                             "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                            for n, c in enumerate(calls)])


def tool_step(index: int, turn: int, asked_by: int, call: str, result: str = "{}", executed: bool = True) -> Step:
    return Step(index=index, agent="executor", kind="tool", content=result,
                metadata={"turn": turn, "asked_by": asked_by, "executed": executed, "call": call})


def turn_0() -> list[Step]:
    """The real run's turn 0, which passed: the request, the plan, the caller's `get_watchlist()` and its answer."""
    return [Step.model_validate({**s, "call_ids": [f"c{s['index']}"] if s["kind"] == "agent" else []})
            for s in DATA["steps"][:5]]


def test_calls_compare_by_parameter_name_with_defaults_left_out():
    functions = task_functions(TASK)
    assert call_key("remove_stock_from_watchlist('NVDA')", functions) == call_key(
        "remove_stock_from_watchlist(symbol='NVDA')", functions)
    assert call_key("remove_stock_from_watchlist(symbol='TSLA')", functions) != call_key(
        "remove_stock_from_watchlist(symbol='NVDA')", functions)
    default = next((n, p, v["default"]) for n, d in functions.items()
                   for p, v in d["parameters"]["properties"].items() if "default" in v and v["default"] == "None")
    name, parameter, _ = default
    assert call_key(f"{name}({parameter}=None)", functions) == call_key(f"{name}()", functions)
    assert call_key("get_watchlist(x)", functions) is None  # not a literal: never equal to anything
    truth = ["get_stock_info(symbol='AAPL')", "place_order(order_type='Buy',symbol='AAPL',price=227.16,amount=100)"]
    assert matching(["get_stock_info('AAPL')", "place_order(order_type='Buy', symbol='AAPL', price=227.16, amount=10)"],
                    truth, 0, functions) == 1
    assert matching(["place_order(order_type='Buy',symbol='AAPL',price=227.16,amount=100)"], truth, 1, functions) == 1


def test_the_real_runs_silent_caller_is_corrected_with_the_turns_call_and_no_other_step_is():
    run = real_run()
    assert run.verdict is not None and (run.verdict.details["check"], run.verdict.details["turn"]) == ("no calls", 1)
    p = proposer(run)
    found = {s.index: p.from_calls(s) for s in run.steps if s.kind == "agent"}
    assert [i for i, f in found.items() if f is not None] == [7]
    calls, why = found[7]
    assert calls == [REMOVE]
    assert why == "it ended user turn 1 without the calls the turn needs (remove_stock_from_watchlist(symbol='NVDA'))"
    assert proposer(run, None).from_calls(run.steps[7]) is None  # no verifier: nothing judged


def test_a_wrong_argument_is_corrected_where_it_was_made():
    steps = [*turn_0(), Step(index=5, agent="executor", kind="human", content=TASK.metadata["turns"][1], metadata={"turn": 1}),
             calls_step(6, 1, [{"name": "remove_stock_from_watchlist", "arguments": {"symbol": "TSLA"}}]),
             tool_step(7, 1, 6, "remove_stock_from_watchlist(symbol='TSLA')", '{"status": "Stock TSLA removed"}'),
             Step(index=8, agent="caller", content="Removed TSLA.", call_ids=["c8"], metadata={"turn": 1})]
    run = trajectory(steps)
    assert run.verdict is not None and (run.verdict.details["check"], run.verdict.details["turn"]) == ("state", 1)
    p = proposer(run)
    assert p.from_calls(run.steps[8]) is None  # the step after it only answered
    calls, why = p.from_calls(run.steps[6])
    assert calls == [REMOVE]
    assert why == ("its call remove_stock_from_watchlist(symbol='TSLA') is not the next of user turn 1's ground-truth "
                   "calls (remove_stock_from_watchlist(symbol='NVDA'))")


def test_a_harmless_extra_call_is_read_past_and_the_step_that_ended_the_turn_short_is_corrected():
    """The caller looked at the watchlist again (a read-only call the truth does not make: with the truth after it the
    turn passes) and then answered without removing anything: the error is the answer, not the look."""
    steps = [*turn_0(), Step(index=5, agent="executor", kind="human", content=TASK.metadata["turns"][1], metadata={"turn": 1}),
             calls_step(6, 1, [{"name": "get_watchlist", "arguments": {}}]),
             tool_step(7, 1, 6, "get_watchlist()", '{"watchlist": ["NVDA", "TSLA", "GOOG"]}'),
             Step(index=8, agent="caller", content="Removed NVDA.", call_ids=["c8"], metadata={"turn": 1})]
    run = trajectory(steps)
    assert run.verdict is not None and run.verdict.details["turn"] == 1
    p = proposer(run)
    assert p.from_calls(run.steps[6]) is None
    calls, why = p.from_calls(run.steps[8])
    assert calls == [REMOVE] and why.startswith("it ended user turn 1 without the calls")


def test_a_call_that_did_not_run_is_not_one_of_the_truths():
    steps = [*turn_0(), Step(index=5, agent="executor", kind="human", content=TASK.metadata["turns"][1], metadata={"turn": 1}),
             calls_step(6, 1, [{"name": "remove_stock", "arguments": {"symbol": "NVDA"}}]),
             tool_step(7, 1, 6, "remove_stock(symbol='NVDA')", "Error: unknown function remove_stock", executed=False),
             Step(index=8, agent="caller", content="Removed NVDA.", call_ids=["c8"], metadata={"turn": 1})]
    run = trajectory(steps)
    calls, why = proposer(run).from_calls(run.steps[6])
    assert calls == [REMOVE] and "that did not run" in why


def replay_with_checker(run: Trajectory, replays: list[Intervention]):
    """The team after an intervention, judged by BFCL's checker: the forced step's calls run (as the tool server would
    run them: a call of the turn's truth returns the truth's result), the replay stops after the failing turn
    (`until_turn`), and a step that makes no call leaves the turn as it failed."""

    def fn(intervention: Intervention) -> tuple[Trajectory, Verdict, ReplayOutcome]:
        replays.append(intervention)
        steps = list(run.steps[:intervention.step])
        forced = run.steps[intervention.step]
        calls = intervention.tool_calls if intervention.kind == "fix" else None
        if calls is None:
            steps += run.steps[intervention.step:8]
        else:
            steps.append(calls_step(forced.index, 1, calls, intervention.new_content))
            steps += [tool_step(forced.index + 1 + n, 1, forced.index,
                                f"{c['name']}({', '.join(f'{k}={v!r}' for k, v in c['arguments'].items())})")
                      for n, c in enumerate(calls)]
        answer = executed_calls_answer(steps)
        verdict = check(TASK, answer)
        if verdict.details.get("check") == "turns":
            verdict = verdict.model_copy(update={"details": {**verdict.details, "stopped_after_turn": 1}})
        replayed = run.model_copy(update={"steps": steps, "final_answer": answer, "verdict": verdict, "parent_run_id": run.id})
        return replayed, verdict, ReplayOutcome(cost=Usage(llm_calls=2, replayed_calls=4))

    return fn


def test_the_search_labels_the_silent_caller_with_no_fix_from_the_analyzer():
    """The search that ended unresolved with the local analyzer: the caller's step 7 is given the turn's call before
    the analyzer is asked; BFCL's checker passes turn 1 with it, the control fails it; the scan asks the analyzer only
    about the four agent steps before it (each judged correct here), and the label is caller@7."""
    run = real_run()
    real = json.loads((FIXTURES / "analyzer_replies" / "bfcl_after_failure.json").read_text())["ranked_after_the_failing_turn"]
    prompts: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompts.append(messages[-1]["content"])
        if re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompts[-1]):
            return json.dumps({"fix_needed": False, "reason": "this step is right"})
        return real

    register_script("bfcl-grounded-calls", analyzer)
    replays: list[Intervention] = []
    result = find_decisive_step(run, analyzer=Chat("scripted/bfcl-grounded-calls"), replay=replay_with_checker(run, replays),
                                budget=Budget(), verify=check)
    a = result.annotation
    assert (a.status, a.verified, a.agent, a.step, a.earliest, a.fixed_turn) == (
        "labelled", True, "caller", 7, "established", 1), a.evidence.notes
    first = result.attempts[0].diagnosis
    assert (first.step, first.source, first.written, first.tool_calls) == (7, "grounded", "calls", [REMOVE])
    assert sorted((i.step, i.kind) for i in replays) == [(7, "control"), (7, "fix")]
    asked = [int(m.group(1)) for p in prompts if (m := re.search(r"STEP UNDER EXAMINATION: step (\d+)", p))]
    assert asked == [1, 2, 4, 6] and len(prompts) == 4  # the ranked question was never needed
    assert any("its calls replaced by the failed turn's ground-truth calls" in n for n in a.evidence.notes)


def test_other_tasks_get_no_call_correction():
    from rootstep.benchmarks import load_tasks

    gsm = next(iter(load_tasks("gsm8k", limit=1)))
    run = real_run()
    p = FixProposer(run, run.verdict, TaskContext(question=gsm.prompt, task=gsm), lambda *a, **k: "", Meter(Budget()),
                    [], [], 24_000, check, None, None)
    assert p.from_calls(run.steps[7]) is None
