"""BFCL multi-turn episodes for real in the frameworks' sandbox images: BFCL's own simulators behind AG2's function
map, smolagents' `Tool`s, camel's `FunctionTool`s (OWL) and MetaGPT's function-calling caller, scripted agents through the in-process gateway, BFCL's own checker as Omega.

A caller that makes the ground-truth calls of each turn passes; one wrong argument fails at its turn; the run
replays exactly; an intervention that corrects the call flips it; a call of an unknown function, or with
arguments that do not fit, gets a tool error and is not run; a held-back function appears at its turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rootstep.benchmarks import load_tasks
from rootstep.benchmarks._bfcl import parse_call
from rootstep.model import Intervention, Task

from ._adapter_support import assert_exact_replay, framework_env

pytestmark = pytest.mark.docker

PLAN = "1. Call the functions the request needs, in order, with the values it gives."


def tool_calls(task: Task, calls: list[str]) -> list[dict[str, Any]]:
    """BFCL call strings as OpenAI tool calls; positional arguments named in the function document's order."""
    docs = {d["name"]: d for d in [*task.metadata["functions"], *(d for ds in task.metadata["held_back"].values() for d in ds)]}
    out = []
    for call in calls:
        name, positional, keywords = parse_call(call)
        names = list(docs[name]["parameters"]["properties"]) if name in docs else []
        out.append({"name": name, "arguments": {**dict(zip(names, positional)), **keywords}})
    return out


def caller_for(task: Task, per_turn: dict[int, list[dict[str, Any]]]) -> Any:
    """A scripted caller: at each user turn, the calls `per_turn` gives (default: the ground truth's), all in one
    step; once their results are back, a one-line answer that ends the turn."""
    turns = task.metadata["turns"]

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        at = max(i for i, m in enumerate(messages) if m.get("content") in turns)
        turn = turns.index(messages[at]["content"])
        if any(m.get("role") == "tool" for m in messages[at:]):
            return "Done."
        calls = per_turn.get(turn, tool_calls(task, task.metadata["ground_truth_calls"][turn]))
        return {"content": None, "tool_calls": calls} if calls else "Done."

    return reply


def wrong_first_turn(task: Task) -> list[dict[str, Any]]:
    """The first turn's ground-truth calls with one wrong argument: not the directory the user asked for."""
    calls = tool_calls(task, task.metadata["ground_truth_calls"][0])
    calls[1] = {"name": "mkdir", "arguments": {"dir_name": "tmp"}}
    return calls


def clumsy_first_turn(task: Task) -> list[dict[str, Any]]:
    """An unknown function and a call whose arguments do not fit, then the first turn's ground-truth calls."""
    return [{"name": "rm_rf", "arguments": {"path": "/"}}, {"name": "mkdir", "arguments": {"folder": "temp"}},
            *tool_calls(task, task.metadata["ground_truth_calls"][0])]


def callers(name: str, task: Task, caller: Any) -> dict[str, Any]:
    """Scripts `name`-right (the ground-truth calls), `name`-wrong (`wrong_first_turn`) and `name`-clumsy
    (`clumsy_first_turn`) from a scripted caller factory (`caller_for`, `turn_caller`, `smol_caller`)."""
    return {f"{name}-right": caller(task, {}), f"{name}-wrong": caller(task, {0: wrong_first_turn(task)}),
            f"{name}-clumsy": caller(task, {0: clumsy_first_turn(task)})}


def scripted_env(framework: str, tmp_path_factory, docker_sandbox, scripts: dict[str, Any]):
    """`framework_env` with `scripts` (name -> reply function) registered with the gateway's scripted provider."""
    from rootstep.gateway import register_script

    for name, reply in scripts.items():
        register_script(name, reply)
    yield from framework_env(framework, tmp_path_factory, docker_sandbox)


def assert_calls_are_tool_steps(t, task: Task, asker: str) -> None:
    """Every ground-truth call ran, in order, as a `tool` step after the `asker` step of its turn that asked for it;
    every LLM step is linked to the scripted call that produced it, no other step to any."""
    gt = task.metadata["ground_truth_calls"]
    tools = [s for s in t.steps if s.kind == "tool"]
    assert [s.metadata["call"] for s in tools] == [c for turn in gt for c in _named(task, turn)]
    for s in tools:
        asking = t.steps[s.metadata["asked_by"]]
        assert asking.agent == asker and asking.tool_calls and asking.index < s.index and s.metadata["executed"]
        assert asking.metadata["turn"] == s.metadata["turn"]
    for s in t.steps:
        assert (len(s.call_ids) == 1) == (s.kind == "agent")
    assert t.metadata["unlinked_calls"] == []


def team_run(env, task: Task, first: str, role: str, script: str):
    """`task` run by the scripted team: `first` for every agent but `role`, whose script is `script`."""
    t = env["adapter"].run(task, f"scripted/{first}", agent_models={role: f"scripted/{script}"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    return t


def passing_run(env, task: Task, first: str, role: str, script: str, turn_0: list[tuple[str, str]] | None = None):
    """The team whose `role` (scripted `script`) makes the ground-truth calls: it passes, each user turn a `user`
    `human` step, every call a tool step after the `role` step that asked for it; its first turn's steps are `turn_0`
    (agent, kind) when given. The run."""
    t = team_run(env, task, first, role, script)
    assert t.verdict.success, t.verdict.details
    gt = task.metadata["ground_truth_calls"]
    assert [(s.agent, s.metadata["turn"]) for s in t.steps if s.kind == "human"] == [("user", n) for n in range(len(gt))]
    if turn_0 is not None:
        assert [(s.agent, s.kind) for s in t.steps if s.metadata.get("turn") == 0] == turn_0
    assert_calls_are_tool_steps(t, task, role)
    return t


def assert_clumsy_calls_refused(env, task: Task, first: str, role: str, script: str, unknown_says: str) -> None:
    """The team whose `role` first calls an unknown function and one with unfit arguments (`clumsy_first_turn`): both
    get a tool error (the unknown one's says `unknown_says`) and are not run; the ground-truth calls after them pass."""
    t = team_run(env, task, first, role, script)
    refused = [s for s in t.steps if s.kind == "tool" and not s.metadata["executed"]]
    assert [s.tool_calls[0]["name"] for s in refused] == ["rm_rf", "mkdir"]
    assert "rm_rf" in refused[0].content and unknown_says in refused[0].content
    assert "bad arguments for mkdir: missing a required argument: 'dir_name'" in refused[1].content
    assert t.verdict.success, t.verdict.details


def assert_wrong_turn_fails_replays_and_flips(env, task: Task, first: str, role: str, script: str) -> None:
    """The team whose `role` (scripted `script`) makes one wrong call at turn 0 fails there on the state check, replays
    exactly, and the correction of that call at its step (`Intervention.tool_calls`) flips the run."""
    failed = team_run(env, task, first, role, script)
    assert (failed.verdict.success, failed.verdict.details["check"], failed.verdict.details["turn"]) == (False, "state", 0)
    assert_exact_replay(env, failed, replayed_calls=sum(1 for s in failed.steps if s.kind == "agent"))
    step = next(s for s in failed.steps if s.agent == role and s.tool_calls)
    fixed = env["adapter"].replay(failed, Intervention(
        run_id=failed.id, step=step.index, new_content="", tool_calls=tool_calls(task, task.metadata["ground_truth_calls"][0])))
    assert fixed.verdict.success, fixed.verdict.details


@pytest.fixture(scope="module")
def task() -> Task:
    return load_tasks("bfcl", limit=1)[0]  # 4 turns over the file system: cd, mkdir, mv, grep, sort, diff


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox, task):
    yield from scripted_env("ag2", tmp_path_factory, docker_sandbox, {
        "bfcl-planner": lambda m, p: PLAN, **callers("bfcl-caller", task, caller_for)})


def run(env, task: Task, caller: str):
    return team_run(env, task, "bfcl-planner", "caller", caller)


@pytest.fixture(scope="module")
def failed(env, task):
    return run(env, task, "bfcl-caller-wrong")


def test_a_team_that_makes_the_ground_truth_calls_passes_with_every_call_a_tool_step(env, task):
    t = run(env, task, "bfcl-caller-right")
    assert t.verdict.success, t.verdict.details
    gt = task.metadata["ground_truth_calls"]
    humans = [s for s in t.steps if s.kind == "human"]
    assert [s.metadata["turn"] for s in humans] == list(range(len(gt)))
    assert [s.content for s in humans] == task.metadata["turns"]
    # per turn: executor (the request), planner, caller (the calls), one tool step per call, caller (done)
    first = [(s.agent, s.kind) for s in t.steps[:4]]
    assert first == [("executor", "human"), ("planner", "agent"), ("caller", "agent"), ("executor", "tool")]
    tools = [s for s in t.steps if s.kind == "tool"]
    assert [s.metadata["call"] for s in tools] == [c for turn in gt for c in _named(task, turn)]
    for s in tools:
        asker = t.steps[s.metadata["asked_by"]]
        assert asker.agent == "caller" and asker.tool_calls and s.metadata["executed"]
        assert asker.metadata["turn"] == s.metadata["turn"]
        assert asker.content == ""  # a call-only message has no text (AG2 keeps it as the string "None")
    assert json.loads(t.final_answer)["turns"][0] == [_named(task, gt[0])]
    for s in t.steps:  # every LLM step is linked to the scripted call that produced it; no other step to any
        assert (len(s.call_ids) == 1) == (s.kind == "agent")
    assert t.metadata["unlinked_calls"] == []


def _named(task: Task, calls: list[str]) -> list[str]:
    """The ground truth's calls as the tool server writes them (keyword arguments, `repr` values)."""
    from rootstep.adapters._drivers._bfcl_tools import call_string

    return [call_string(c["name"], c["arguments"]) for c in tool_calls(task, calls)]


def test_one_wrong_argument_fails_at_its_turn(failed):
    assert failed.verdict.success is False
    assert (failed.verdict.details["check"], failed.verdict.details["turn"]) == ("state", 0), failed.verdict.details
    assert "mkdir(dir_name='tmp')" in failed.final_answer


def test_the_failed_run_replays_exactly(env, failed):
    n_agent = sum(1 for s in failed.steps if s.kind == "agent")
    assert_exact_replay(env, failed, replayed_calls=n_agent)


def test_correcting_the_call_at_its_step_flips_the_run(env, task, failed):
    step = next(s for s in failed.steps if s.agent == "caller" and s.tool_calls)
    right = tool_calls(task, task.metadata["ground_truth_calls"][0])
    fixed = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=step.index, new_content="",
                                                       tool_calls=right))
    assert fixed.verdict.success, fixed.verdict.details
    assert "mkdir(dir_name='temp')" in fixed.final_answer and "mkdir(dir_name='tmp')" not in fixed.final_answer


def test_a_replay_until_the_failing_turn_stops_after_it(env, task, failed):
    """What the searches replay of a multi-turn failure: up to the turn it failed at. The corrected call passes
    that turn, and the replay ends there; the control (the step as recorded) fails at it again."""
    step = next(s for s in failed.steps if s.agent == "caller" and s.tool_calls)
    right = tool_calls(task, task.metadata["ground_truth_calls"][0])
    fixed = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=step.index, new_content="",
                                                       tool_calls=right), until_turn=0)
    assert fixed.verdict.details == {**fixed.verdict.details, "check": "turns", "turn": 1, "stopped_after_turn": 0}
    assert {s.metadata.get("turn") for s in fixed.steps} == {0} and fixed.replay.prefix_identical
    control = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=step.index, new_content=step.content,
                                                         tool_calls=step.tool_calls, kind="control"), until_turn=0)
    assert (control.verdict.details["check"], control.verdict.details["turn"]) == ("state", 0)
    assert "stopped_after_turn" not in control.verdict.details


def test_the_search_corrects_the_wrong_call_with_the_turns_ground_truth_when_the_analyzer_writes_no_call(env, task, failed):
    """The counterfactual search over the real AG2 replay and BFCL's checker, with an analyzer that, as the local 1.5B
    did on every BFCL run, only describes the fix in prose: the caller's step with the wrong `mkdir` is given the
    turn's ground-truth calls before the analyzer is asked (the grounded phase), its replay up to turn 0 passes it
    and stops, the control fails it, and the planner's step before it is cleared by the analyzer: caller@<that step>."""
    from rootstep.annotation import Budget, find_decisive_step
    from rootstep.benchmarks import verify
    from rootstep.flows import adapter_replay
    from rootstep.gateway import Chat, register_script

    step = next(s for s in failed.steps if s.agent == "caller" and s.tool_calls)
    asked: list[str] = []

    def analyzer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        asked.append(messages[-1]["content"])
        if "STEP UNDER EXAMINATION" in asked[-1]:
            return json.dumps({"fix_needed": False, "reason": "the plan is right"})
        return json.dumps({"mistake_step": step.index, "mistake_agent": "caller", "reason": "wrong folder",
                           "suggested_fix": "The caller should have created the folder the user asked for."})

    register_script("bfcl-describing-analyzer", analyzer)
    result = find_decisive_step(failed, analyzer=Chat("scripted/bfcl-describing-analyzer"),
                                replay=adapter_replay(env["adapter"], failed, until_turn=0), budget=Budget(),
                                verify=lambda t, a: verify(t, a))
    a = result.annotation
    assert (a.status, a.agent, a.step, a.earliest, a.fixed_turn) == ("labelled", "caller", step.index, "established", 0), \
        a.evidence.notes
    first = result.attempts[0]
    assert (first.diagnosis.source, first.diagnosis.written) == ("grounded", "calls")
    assert first.diagnosis.tool_calls == tool_calls(task, task.metadata["ground_truth_calls"][0])
    assert first.stopped_after_turn == 0
    assert not any("You are the analyzer" in p and "STEP UNDER EXAMINATION" not in p for p in asked)  # no ranked call


def test_a_run_cut_by_its_time_limit_fails_at_the_turn_it_was_cut_in(env, task, docker_sandbox):
    """The caller never answers turn 1 within the episode's 40 s: the run is kept as a time-limit failure, and the
    turns it reached are judged, so that its failure has a turn (the searches' horizon and `until_turn`)."""
    import time

    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier
    from rootstep.gateway import register_script

    right = caller_for(task, {})
    turns = task.metadata["turns"]

    def slow_after_turn_0(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        if any(m.get("content") == turns[1] for m in messages):
            time.sleep(45)
        return right(messages, params)

    register_script("bfcl-caller-asleep-at-turn-1", slow_after_turn_0)
    adapter = get_adapter("ag2", gateway=env["server"], verifier=default_verifier(docker_sandbox), timeout_s=40)
    t = adapter.run(task, "scripted/bfcl-planner", agent_models={"caller": "scripted/bfcl-caller-asleep-at-turn-1"})
    assert t.metadata["error"] == "time limit: the episode was cut after 40 s"
    assert {s.metadata.get("turn") for s in t.steps} == {0, 1}  # turn 0 done, turn 1 begun
    assert t.verdict.success is False
    assert {k: t.verdict.details.get(k) for k in ("failure", "turn", "check")} == {
        "failure": "time limit", "turn": 1, "check": "no calls"}, t.verdict.details


def test_unknown_functions_and_unfit_arguments_get_a_tool_error_and_are_not_run(env, task):
    t = run(env, task, "bfcl-caller-clumsy")
    tools = [s for s in t.steps if s.kind == "tool" and s.metadata["turn"] == 0]
    refused = [s for s in tools if not s.metadata["executed"]]
    assert [s.tool_calls[0]["name"] for s in refused] == ["rm_rf", "mkdir"]
    assert "rm_rf" in refused[0].content and "not found" in refused[0].content
    assert "bad arguments for mkdir: missing a required argument: 'dir_name'" in refused[1].content
    assert "its parameters: (dir_name: str)" in refused[1].content
    assert all(s.metadata["call"] is None for s in refused)
    assert t.verdict.success, t.verdict.details  # what was refused never ran: the state is the ground truth's


def test_a_held_back_function_appears_at_its_turn(env):
    task = load_tasks("bfcl-miss-func", limit=1)[0]
    [(turn, docs)] = task.metadata["held_back"].items()
    from rootstep.gateway import register_script

    early = {0: [*tool_calls(task, task.metadata["ground_truth_calls"][0]),
                 {"name": "sort", "arguments": {"file_name": "final_report.pdf"}}]}
    register_script("bfcl-caller-early", caller_for(task, early))
    t = run(env, task, "bfcl-caller-early")
    early_sort = [s for s in t.steps if s.kind == "tool" and s.metadata["turn"] == 0 and s.tool_calls[0]["name"] == "sort"]
    assert [s.metadata["executed"] for s in early_sort] == [False]  # not offered yet
    at_turn = [s for s in t.steps if s.kind == "tool" and s.metadata["turn"] == int(turn)]
    assert [s.tool_calls[0]["name"] for s in at_turn] == [d["name"] for d in docs] and at_turn[0].metadata["executed"]


# ------------------------------------------------------------------------------------ smolagents


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def smol_manager(task: Task):
    """A scripted smolagents manager: hands each new user request to `caller` verbatim; once the caller has
    reported, answers the user with `final_answer`."""
    turns = task.metadata["turns"]

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        last = _content(messages[-1])
        request = next((t for t in turns if t in last), None)
        if request is not None and "caller" not in last.split(request)[-1]:
            return {"content": None, "tool_calls": [{"name": "caller", "arguments": {"task": request}}]}
        return {"content": None, "tool_calls": [{"name": "final_answer", "arguments": {"answer": "Done."}}]}

    return reply


def smol_caller(task: Task, per_turn: dict[int, list[dict[str, Any]]]):
    """A scripted smolagents caller (reset at every task it is given): the turn's calls first, then `final_answer`."""
    turns = task.metadata["turns"]

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        said = "\n".join(_content(m) for m in messages if m.get("role") != "system")
        turn = max(i for i, t in enumerate(turns) if t in said)
        if len([m for m in messages if m.get("role") != "system"]) > 1:  # the calls' results are back
            return {"content": None, "tool_calls": [{"name": "final_answer", "arguments": {"answer": "done"}}]}
        calls = per_turn.get(turn, tool_calls(task, task.metadata["ground_truth_calls"][turn]))
        return {"content": None, "tool_calls": calls or [{"name": "final_answer", "arguments": {"answer": "nothing to call"}}]}

    return reply


@pytest.fixture(scope="module")
def smol_env(tmp_path_factory, docker_sandbox, task):
    yield from scripted_env("smolagents", tmp_path_factory, docker_sandbox, {
        "bfcl-smol-manager": smol_manager(task), **callers("bfcl-smol-caller", task, smol_caller)})



def test_smolagents_team_that_makes_the_ground_truth_calls_passes(smol_env, task):
    t = team_run(smol_env, task, "bfcl-smol-manager", "caller", "bfcl-smol-caller-right")
    assert t.verdict.success, t.verdict.details
    gt = task.metadata["ground_truth_calls"]
    assert [s.metadata["turn"] for s in t.steps if s.kind == "human"] == list(range(len(gt)))
    assert_calls_are_tool_steps(t, task, "caller")
    first = [(s.agent, s.kind) for s in t.steps[:4]]
    assert first == [("user", "human"), ("manager", "agent"), ("caller", "agent"), ("tools", "tool")]


def test_smolagents_wrong_argument_fails_at_its_turn_and_replays_exactly(smol_env, task):
    failed = team_run(smol_env, task, "bfcl-smol-manager", "caller", "bfcl-smol-caller-wrong")
    assert (failed.verdict.success, failed.verdict.details["check"], failed.verdict.details["turn"]) == (False, "state", 0)
    assert_exact_replay(smol_env, failed, replayed_calls=sum(1 for s in failed.steps if s.kind == "agent"))


# ------------------------------------------------------------------------------------ OWL (camel role-playing)


def owl_instructor(task: Task):
    """A scripted OWL instructor: each new user request handed on as one instruction; TASK_DONE once the
    assistant has reported its round."""
    turns = task.metadata["turns"]

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        last = _content(messages[-1])
        if "Function calls made" in last or "No function was called" in last:
            return "TASK_DONE"
        return "Do this: " + next(t for t in turns if t in last)

    return reply


def turn_caller(task: Task, per_turn: dict[int, list[dict[str, Any]]]):
    """A scripted caller that reads its turn from the request its last user message quotes (OWL's assistant, the
    AgentPrune decision node): that turn's calls in one response; once their results are back, a line."""
    turns = task.metadata["turns"]

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        at = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        if any(m.get("role") == "tool" for m in messages[at:]):
            return "Done: the functions ran."
        turn = next(i for i, t in enumerate(turns) if t in _content(messages[at]))
        calls = per_turn.get(turn, tool_calls(task, task.metadata["ground_truth_calls"][turn]))
        return {"content": None, "tool_calls": calls} if calls else "Nothing to call."

    return reply


@pytest.fixture(scope="module")
def owl_env(tmp_path_factory, docker_sandbox, task):
    yield from scripted_env("owl", tmp_path_factory, docker_sandbox, {
        "bfcl-owl-instructor": owl_instructor(task), **callers("bfcl-owl-assistant", task, turn_caller)})



def test_owl_pair_that_makes_the_ground_truth_calls_passes_with_every_call_a_tool_step(owl_env, task):
    gt = task.metadata["ground_truth_calls"]
    # per turn: the request, the instruction, the assistant's calls, a tool step per call, its line, TASK_DONE
    t = passing_run(owl_env, task, "bfcl-owl-instructor", "assistant", "bfcl-owl-assistant-right", [
        ("user", "human"), ("instructor", "agent"), ("assistant", "agent"), *[("tools", "tool")] * len(gt[0]),
        ("assistant", "agent"), ("instructor", "agent")])
    assert all(c["type"] == "function" for s in t.steps for c in s.tool_calls if s.kind == "agent")  # as given
    assert t.final_answer == calls_answer_of(task, gt)


def calls_answer_of(task: Task, gt: list[list[str]]) -> str:
    from rootstep.benchmarks._bfcl import calls_answer

    return calls_answer([[_named(task, turn)] for turn in gt])


def test_owl_wrong_argument_fails_at_its_turn_replays_exactly_and_its_correction_flips_it(owl_env, task):
    assert_wrong_turn_fails_replays_and_flips(owl_env, task, "bfcl-owl-instructor", "assistant", "bfcl-owl-assistant-wrong")


def test_owl_unknown_functions_and_unfit_arguments_are_refused_and_not_run(owl_env, task):
    assert_clumsy_calls_refused(owl_env, task, "bfcl-owl-instructor", "assistant", "bfcl-owl-assistant-clumsy", "not found")


# ------------------------------------------------------------------------------------ MetaGPT


@pytest.fixture(scope="module")
def metagpt_env(tmp_path_factory, docker_sandbox, task):
    yield from scripted_env("metagpt", tmp_path_factory, docker_sandbox, {
        "bfcl-mg-planner": lambda m, p: PLAN, **callers("bfcl-mg-caller", task, caller_for)})



def test_metagpt_team_that_makes_the_ground_truth_calls_passes_with_every_call_a_tool_step(metagpt_env, task):
    # per turn: the request, the plan, the caller's calls, one tool step per call, the caller's closing line
    n = len(task.metadata["ground_truth_calls"][0])
    passing_run(metagpt_env, task, "bfcl-mg-planner", "caller", "bfcl-mg-caller-right",
                [("user", "human"), ("planner", "agent"), ("caller", "agent"), *[("executor", "tool")] * n, ("caller", "agent")])


def test_metagpt_wrong_argument_fails_at_its_turn_replays_exactly_and_its_correction_flips_it(metagpt_env, task):
    assert_wrong_turn_fails_replays_and_flips(metagpt_env, task, "bfcl-mg-planner", "caller", "bfcl-mg-caller-wrong")


# ------------------------------------------------------------------------------------ AgentPrune


@pytest.fixture(scope="module")
def agentprune_env(tmp_path_factory, docker_sandbox, task):
    yield from scripted_env("agentprune", tmp_path_factory, docker_sandbox, {
        "bfcl-ap-planner": lambda m, p: PLAN, **callers("bfcl-ap-decision", task, turn_caller)})


def test_agentprune_graph_whose_decision_makes_the_ground_truth_calls_passes(agentprune_env, task):
    t = passing_run(agentprune_env, task, "bfcl-ap-planner", "decision", "bfcl-ap-decision-right")
    gt = task.metadata["ground_truth_calls"]
    # per turn: the request, the graph's agents (one round), the decision's calls, a tool step per call, its line
    order = t.metadata["agentprune"]["round_graphs"][0]["order"]
    assert sorted(order) == ["analyst", "inspector"]
    assert [(s.agent, s.kind) for s in t.steps if s.metadata.get("turn") == 0] == [
        ("user", "human"), *[(a, "agent") for a in order], ("decision", "agent"), *[("decision", "tool")] * len(gt[0]),
        ("decision", "agent")]
    assert t.final_answer == calls_answer_of(task, gt)
    # what each step read: its turn's request, the calls before it, its predecessors; the decision its own calls too
    turn1 = next(s for s in t.steps if s.kind == "human" and s.metadata["turn"] == 1)
    first_agent = next(s for s in t.steps if s.kind == "agent" and s.metadata["turn"] == 1)
    assert first_agent.metadata["reads"] == sorted([turn1.index, *(s.index for s in t.steps[:turn1.index] if s.kind == "tool")])
    closing = [s for s in t.steps if s.agent == "decision" and s.kind == "agent" and s.metadata["turn"] == 0][-1]
    asking = [s for s in t.steps if s.agent == "decision" and s.kind == "agent" and s.metadata["turn"] == 0][0]
    assert asking.index in closing.metadata["reads"]
    assert {s.index for s in t.steps if s.kind == "tool" and s.metadata["turn"] == 0} <= set(closing.metadata["reads"])


def test_agentprune_wrong_argument_fails_at_its_turn_replays_exactly_and_its_correction_flips_it(agentprune_env, task):
    assert_wrong_turn_fails_replays_and_flips(agentprune_env, task, "bfcl-ap-planner", "decision", "bfcl-ap-decision-wrong")


def test_agentprune_unknown_functions_and_unfit_arguments_are_refused_and_not_run(agentprune_env, task):
    assert_clumsy_calls_refused(agentprune_env, task, "bfcl-ap-planner", "decision", "bfcl-ap-decision-clumsy", "no function named 'rm_rf' is available")


# ------------------------------------------------------------------------------------ AFlow


def aflow_plans(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
    """Scripted plan candidates and ScEnsemble: a plan; the letter A when asked to choose."""
    return "<thought>Both plans agree.</thought>\n<solution_letter>A</solution_letter>" if (
        "<solution_letter>" in _content(messages[-1])) else PLAN


@pytest.fixture(scope="module")
def aflow_env(tmp_path_factory, docker_sandbox, task):
    yield from scripted_env("aflow", tmp_path_factory, docker_sandbox, {
        "bfcl-af-plans": aflow_plans, **callers("bfcl-af-caller", task, turn_caller)})


def test_aflow_workflow_whose_caller_makes_the_ground_truth_calls_passes(aflow_env, task):
    gt = task.metadata["ground_truth_calls"]
    # per turn: the request, two candidate plans, ScEnsemble's choice, the caller's calls, a tool step per call, a line
    t = passing_run(aflow_env, task, "bfcl-af-plans", "caller", "bfcl-af-caller-right", [
        ("user", "human"), ("custom", "agent"), ("custom", "agent"), ("sc_ensemble", "agent"), ("caller", "agent"),
        *[("caller", "tool")] * len(gt[0]), ("caller", "agent")])
    assert t.final_answer == calls_answer_of(task, gt)


def test_aflow_wrong_argument_fails_at_its_turn_replays_exactly_and_its_correction_flips_it(aflow_env, task):
    assert_wrong_turn_fails_replays_and_flips(aflow_env, task, "bfcl-af-plans", "caller", "bfcl-af-caller-wrong")
