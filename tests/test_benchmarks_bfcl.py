"""BFCL multi-turn as a benchmark: its tasks from the installed bfcl-eval wheel, and its own checker as Omega.

Every check here runs BFCL's real `multi_turn_checker` and API simulators on BFCL's real tasks; nothing of its
data is copied or typed by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rootstep.benchmarks import get_benchmark, load_tasks, verify
from rootstep.adapters._drivers._bfcl_tools import call_string
from rootstep.benchmarks._bfcl import VARIANTS, calls_answer, parse_call, read_calls_answer
from rootstep.model import InputError, Task


def one_step_per_turn(calls: list[list[str]]) -> str:
    """The answer of a team that made, in one agent step per user turn, exactly these calls."""
    return calls_answer([[turn] if turn else [] for turn in calls])


def test_the_four_variants_load_from_the_wheel_with_their_functions_and_turns() -> None:
    for name, variant in VARIANTS.items():
        info = get_benchmark(name)
        assert info.available() and info.kind == "agentic" and info.verifier == "bfcl_multi_turn"
        tasks = load_tasks(name)
        assert len(tasks) == 200 and all(t.task_id.startswith(f"multi_turn_{variant}_") for t in tasks)
        for t in tasks:
            turns, gt = t.metadata["turns"], t.metadata["ground_truth_calls"]
            assert len(turns) == len(gt) and t.prompt == turns[0] and json.loads(t.ground_truth) == gt
            offered = {doc["name"] for doc in t.metadata["functions"]}
            held = {doc["name"] for docs in t.metadata["held_back"].values() for doc in docs}
            assert offered and not offered & held
    first = load_tasks("bfcl", limit=1)[0]
    assert first.metadata["involved_classes"] == ["TwitterAPI", "GorillaFileSystem"]
    assert "final_report.pdf" in first.prompt and first.metadata["initial_config"]["GorillaFileSystem"]


def test_a_held_back_function_comes_at_its_turn_with_bfcls_own_message() -> None:
    task = load_tasks("bfcl-miss-func", limit=1)[0]
    [(turn, docs)] = task.metadata["held_back"].items()
    assert [d["name"] for d in docs] == ["sort"]
    assert task.metadata["turns"][int(turn)] == "I have updated some more functions you can choose from. What about now?"
    assert "sort" not in {d["name"] for d in task.metadata["functions"]}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_ground_truth_calls_pass_bfcls_checker(name: str) -> None:
    for task in load_tasks(name):
        verdict = verify(task, one_step_per_turn(task.metadata["ground_truth_calls"]))
        assert verdict.success and verdict.score == 1.0, (task.task_id, verdict.details)


def test_one_wrong_argument_fails_at_its_turn_with_the_state_difference() -> None:
    task = load_tasks("bfcl", limit=1)[0]
    gt = task.metadata["ground_truth_calls"]
    assert gt[0] == ["cd(folder='document')", "mkdir(dir_name='temp')", "mv(source='final_report.pdf', destination='temp')"]
    wrong = [list(turn) for turn in gt]
    wrong[0][1] = call_string("mkdir", {"dir_name": "tmp"})  # the directory the user did not ask for
    verdict = verify(task, one_step_per_turn(wrong))
    assert not verdict.success
    assert (verdict.details["check"], verdict.details["turn"]) == ("state", 0), verdict.details
    assert "GorillaFileSystem" in verdict.details["error"] and verdict.details["differences"]
    later = [list(turn) for turn in gt]
    later[1] = [call.replace("budget analysis", "quarterly totals") for call in later[1]]  # a pattern not in the file
    verdict = verify(task, one_step_per_turn(later))
    assert (verdict.success, verdict.details["check"], verdict.details["turn"]) == (False, "response", 1)
    assert verdict.details["missing"]


def test_a_turn_without_calls_and_a_run_that_stopped_early_fail_at_that_turn() -> None:
    task = load_tasks("bfcl", limit=1)[0]
    gt = task.metadata["ground_truth_calls"]
    silent = verify(task, one_step_per_turn([gt[0], [], *gt[2:]]))
    assert (silent.success, silent.details["check"], silent.details["turn"]) == (False, "no calls", 1)
    stopped = verify(task, one_step_per_turn(gt[:2]))
    assert not stopped.success and stopped.details["check"] == "turns" and stopped.details["turn"] == 2
    assert stopped.details["error_type"] == "multi_turn:force_terminated"
    # a run that stopped early after a wrong turn failed at the wrong turn, not where it stopped (the turn is the
    # failure horizon of its annotation and the turn a fix must get past)
    wrong_then_stopped = verify(task, one_step_per_turn([gt[0], [call_string("pwd", {})]]))
    assert (wrong_then_stopped.details["check"], wrong_then_stopped.details["turn"]) == ("response", 1), \
        wrong_then_stopped.details


def test_no_state_carries_from_one_check_to_the_next() -> None:
    """The checker caches simulator instances by name in its module's globals: a check that reused a name would
    start from the state the last one left (here: a `temp` made by the wrong run)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    task = load_tasks("bfcl", limit=1)[0]
    gt = task.metadata["ground_truth_calls"]
    wrong = [list(turn) for turn in gt]
    wrong[0][1] = call_string("mkdir", {"dir_name": "tmp"})
    for _ in range(2):
        assert not verify(task, one_step_per_turn(wrong)).success
        assert verify(task, one_step_per_turn(gt)).success
    assert not [n for n in vars(multi_turn_utils) if n.startswith("rootstep_")]  # nothing left behind


def test_the_name_trap_bfcl_has_and_the_verifier_avoids() -> None:
    """Under a model name that is not an identifier, every call of the checker, the ground truth's too, is a
    SyntaxError: states stay equal and a wrong run passes. The verifier names its checks itself."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    task = load_tasks("bfcl", limit=1)[0]
    gt = task.metadata["ground_truth_calls"]
    wrong = [list(turn) for turn in gt]
    wrong[0][1] = call_string("mkdir", {"dir_name": "tmp"})
    entry = {"id": task.task_id, "initial_config": task.metadata["initial_config"],
             "involved_classes": task.metadata["involved_classes"]}
    decoded = [[turn] for turn in wrong]
    trapped = multi_turn_checker(decoded, gt, entry, "multi_turn_base", "a model+name")
    assert trapped["valid"]  # BFCL's checker, fooled
    assert not verify(task, calls_answer(decoded)).success


def test_calls_are_built_from_json_arguments_and_only_literal_calls_are_read() -> None:
    assert call_string("mv", {"source": "a'b.txt", "destination": "temp"}) == "mv(source=\"a'b.txt\", destination='temp')"
    assert call_string("place_order", {"order_type": "Buy", "symbol": "AAPL", "price": 150.5, "amount": 10}) == (
        "place_order(order_type='Buy', symbol='AAPL', price=150.5, amount=10)")
    assert parse_call("ls(a=True)") == ("ls", [], {"a": True})
    assert parse_call("get_zipcode_based_on_city('Rivermist')") == ("get_zipcode_based_on_city", ["Rivermist"], {})
    assert parse_call(call_string("echo", {"content": "x), __import__('os').system('id'"})) == (
        "echo", [], {"content": "x), __import__('os').system('id'"})
    for bad in ("ls(a=__import__('os'))", "ls(x)", "os.system('id')", "ls(**{'a': 1})", "ls(*[1])", "ls(", "x + 1"):
        with pytest.raises(ValueError):
            parse_call(bad)
    for name, args in (("ls -la", {}), ("ls", {"a b": 1}), ("1ls", {})):
        with pytest.raises(ValueError, match="not a valid"):
            call_string(name, args)


def test_answers_the_checker_must_not_run_are_refused_with_the_reason() -> None:
    task = load_tasks("bfcl", limit=1)[0]
    n = len(task.metadata["ground_truth_calls"])
    for answer, reason in ((None, "no answer"), ("42", "not {"), ("{x", "not JSON"),
                           (json.dumps({"turns": [[["ls(a=__import__('os'))"]]]}), "not a literal"),
                           (json.dumps({"turns": [["ls()"]]}), "expected a list of steps"),
                           (json.dumps({"turns": [[] for _ in range(n + 1)]}), f"{n + 1} turns")):
        verdict = verify(task, answer)
        assert not verdict.success and verdict.details["check"] == "answer"
        assert reason in verdict.details["error"], (answer, verdict.details)
    assert read_calls_answer(json.dumps({"turns": [[["ls()"], []]]}), 2) == [[["ls()"], []]]


def test_bad_task_files_name_file_and_task(tmp_path: Path) -> None:
    task_file, answer_file = (tmp_path / "q.json", tmp_path / "a.json")
    row = {"id": "multi_turn_base_7", "question": [[{"role": "user", "content": "hi"}]],
           "initial_config": {}, "involved_classes": ["MathAPI"]}
    task_file.write_text(json.dumps(row) + "\n")
    answer_file.write_text(json.dumps({"id": "multi_turn_base_8", "ground_truth": [["mean(numbers=[1])"]]}) + "\n")
    with pytest.raises(InputError, match="multi_turn_base_7.*no ground truth"):
        load_tasks("bfcl", paths=[task_file, answer_file])
    answer_file.write_text(json.dumps({"id": "multi_turn_base_7", "ground_truth": [[], []]}) + "\n")
    with pytest.raises(InputError, match="2 ground-truth turns for 1 user turns"):
        load_tasks("bfcl", paths=[task_file, answer_file])
    answer_file.write_text(json.dumps({"id": "multi_turn_base_7", "ground_truth": [["mean(numbers=[1])"]]}) + "\n")
    task_file.write_text(json.dumps({**row, "involved_classes": ["WebSearchAPI"]}) + "\n")
    with pytest.raises(InputError, match="involved_classes: unknown API class 'WebSearchAPI'"):
        load_tasks("bfcl", paths=[task_file, answer_file])
    task_file.write_text("{broken\n")
    with pytest.raises(InputError, match="q.json"):
        load_tasks("bfcl", paths=[task_file, answer_file])


def test_the_answer_contract_of_a_bfcl_task_is_its_calls() -> None:
    from rootstep.benchmarks import answer_contract

    contract = answer_contract(load_tasks("bfcl", limit=1)[0])
    assert contract.form == "calls" and "calling the functions you have" in contract.instruction


def test_the_benchmark_and_the_sandbox_tool_server_know_the_same_simulators() -> None:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    from rootstep.adapters._drivers._bfcl_tools import MODULES, PACKAGE
    from rootstep.benchmarks._bfcl import API_CLASSES

    assert set(MODULES) == set(API_CLASSES)
    assert {c: CLASS_FILE_PATH_MAPPING[c] for c in API_CLASSES} == {c: f"{PACKAGE}.{m}" for c, m in MODULES.items()}


def test_the_verifier_loads_no_module_that_makes_folders(tmp_path: Path) -> None:
    """`bfcl_eval.constants.eval_config` creates result folders in the working directory when imported."""
    code = ("from rootstep.benchmarks import load_tasks, verify\n"
            "t = load_tasks('bfcl', limit=1)[0]\n"
            "import json, sys\n"
            "verify(t, json.dumps({'turns': [[c] for c in t.metadata['ground_truth_calls']]}))\n"
            "print(sorted(m for m in sys.modules if m.startswith('bfcl_eval.constants')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr
    assert "eval_config" not in out.stdout and list(tmp_path.iterdir()) == []


def test_a_task_without_its_metadata_is_checked_from_its_ground_truth() -> None:
    task = load_tasks("bfcl", limit=1)[0]
    bare = Task(**{**task.model_dump(), "metadata": {k: v for k, v in task.metadata.items() if k != "ground_truth_calls"}})
    assert verify(bare, one_step_per_turn(task.metadata["ground_truth_calls"])).success


# ------------------------------------------------------------------------------------ the tool server (host side)


def test_the_tool_server_runs_offered_functions_on_bfcls_simulators_and_refuses_the_rest() -> None:
    from rootstep.adapters._drivers._bfcl_tools import ToolServer

    task = load_tasks("bfcl-miss-func", limit=1)[0]
    server = ToolServer(task.model_dump(mode="json"))
    told, record = server.call("cd", {"folder": "document"}, step=2)
    assert json.loads(told) == {"current_working_directory": "document"}
    assert record == {"turn": 0, "step": 2, "name": "cd", "arguments": {"folder": "document"},
                      "call": "cd(folder='document')", "result": told}
    told, record = server.call("sort", {"file_name": "final_report.pdf"}, step=2)  # held back until turn 3
    assert record is None and told.startswith("Error: no function named 'sort' is available. Available functions: ")
    told, record = server.call("mkdir", {"folder": "temp"}, step=2)
    assert record is None and "missing a required argument: 'dir_name'" in told and "(dir_name: str)" in told
    told, record = server.call("mkdir", ["temp"], step=2)
    assert record is None and "must be a JSON object" in told
    told, record = server.call("_load_scenario", {"scenario": {}}, step=2)
    assert record is None and "no function named" in told
    told, record = server.call("cat", {"file_name": "missing.txt"}, step=4)  # ran, and failed inside: recorded
    assert record is not None and "No such file" in told
    [doc] = server.start_turn(3)
    assert doc["name"] == "sort" and server.call("sort", {"file_name": "final_report.pdf"}, step=9)[1] is not None
    assert [r["turn"] for r in server.calls] == [0, 0, 3]


def test_the_tool_server_says_the_calls_made_so_far() -> None:
    from rootstep.adapters._drivers._bfcl_tools import ToolServer

    server = ToolServer(load_tasks("bfcl", limit=1)[0].model_dump(mode="json"))
    assert server.made() == "(no function called yet)"
    server.call("cd", {"folder": "document"}, step=2)
    server.call("ls", {}, step=2)
    lines = server.made().splitlines()
    assert lines[0] == """- cd(folder='document') -> {"current_working_directory": "document"}""" and lines[1].startswith("- ls() -> ")
    assert server.made(limit=1).splitlines() == lines[1:]


def test_tool_steps_sit_right_after_the_step_that_asked_for_them() -> None:
    from rootstep.adapters._drivers._bfcl_tools import CALLS_PER_STEP, in_order, tool_index, tool_step

    agent = [{"index": i, "kind": "agent", "metadata": {}} for i in (0, 1, 2)]
    tools = [{"index": tool_index(asker, j), **tool_step("x", 0, "ok", "f", {}, None, asked_by_index=asker)}
             for asker, j in ((1, 1), (0, 0), (1, 0), (1, CALLS_PER_STEP - 1))]
    ordered = in_order(agent + tools)
    assert [(s["kind"], s["metadata"].get("asked_by")) for s in ordered] == [
        ("agent", None), ("tool", 0), ("agent", None), ("tool", 2), ("tool", 2), ("tool", 2), ("agent", None)]
    assert [s["index"] for s in ordered if s["kind"] == "tool"][1:] == [tool_index(1, 0), tool_index(1, 1),
                                                                       tool_index(1, CALLS_PER_STEP - 1)]
    with pytest.raises(ValueError, match="step 1 asked for more than 1000 tool calls"):
        tool_index(1, CALLS_PER_STEP)


def test_the_executed_calls_of_a_run_are_its_answer_per_turn_and_asking_step() -> None:
    from rootstep.benchmarks import executed_calls_answer
    from rootstep.model import Step

    def tool(i: int, turn: int, asked_by: int, call: str | None) -> Step:
        return Step(index=i, agent="executor", kind="tool", content="ok",
                    metadata={"turn": turn, "asked_by": asked_by, "executed": call is not None, "call": call})

    steps = [Step(index=0, agent="executor", kind="human", content="turn 0", metadata={"turn": 0}),
             Step(index=1, agent="caller", kind="agent", content=""), tool(2, 0, 1, "cd(folder='a')"),
             tool(3, 0, 1, None), tool(4, 0, 1, "ls()"),
             Step(index=5, agent="caller", kind="agent", content=""), tool(6, 0, 5, "pwd()"),
             Step(index=7, agent="executor", kind="human", content="turn 1", metadata={"turn": 1}),
             Step(index=8, agent="caller", kind="agent", content="I need the file name.")]
    assert json.loads(executed_calls_answer(steps)) == {"turns": [[["cd(folder='a')", "ls()"], ["pwd()"]], []]}
    assert json.loads(executed_calls_answer([])) == {"turns": []}


def test_function_documents_become_openai_tools_typed_as_bfcl_types_them() -> None:
    from rootstep.adapters._drivers._bfcl_tools import openai_tools
    from rootstep.benchmarks._bfcl import function_docs

    tools = {t["function"]["name"]: t["function"] for t in openai_tools(function_docs(["TradingBot", "MathAPI"]))}
    order = tools["place_order"]["parameters"]
    assert order["type"] == "object" and order["properties"]["price"] == {
        **order["properties"]["price"], "type": "number", "format": "float"}
    assert set(order["required"]) <= set(order["properties"])
    assert tools["mean"]["parameters"]["properties"]["numbers"]["items"]["type"] == "number"
    for tool in tools.values():
        for prop in tool["parameters"]["properties"].values():
            assert prop["type"] in {"integer", "number", "string", "boolean", "array", "object"}


def test_a_planner_is_told_the_offered_functions_by_name_and_parameters() -> None:
    from rootstep.benchmarks import function_summaries

    task = load_tasks("bfcl-miss-func", limit=1)[0]
    summaries = {s["name"]: s for s in function_summaries(task)}
    assert set(summaries) == {d["name"] for d in task.metadata["functions"]} and "sort" not in summaries
    assert summaries["mkdir"] == {"name": "mkdir", "parameters": "dir_name",
                                  "summary": "Create a new directory in the current directory"}
    assert summaries["tail"]["parameters"] == "file_name, lines=..."
