"""AgentPrune (the published method, reimplemented on the openai client).

Without Docker: the pure graph logic of `adapters/_drivers/agentprune_driver.py` (edge sets, one-shot
pruning mask, seeded sampling, topological order per round), its text helpers, and the adapter's episode
config. With Docker (`@pytest.mark.docker`): the real driver in the framework image, scripted LLM answers
through the in-process gateway: a coding run that succeeds, one that fails, an exact replay, an
intervention that flips the outcome, the seed deciding the recorded mask, a math and a QA run.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

from rootstep.model import Intervention, Task

from ._adapter_support import add_task, assert_exact_replay, framework_env, last_message_text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "adapters" / "_drivers"))
import agentprune_driver as graph  # noqa: E402

CODING = ["analyst", "programmer", "inspector"]
MATH = ["math_solver", "analyst", "programmer", "inspector"]


def _plan(seed: int = 0, agents: list[str] = CODING, **kw):
    args = {"rounds": 2, "pruning_ratio": 0.25, **kw}
    return graph.build_schedule(list(agents), seed=seed, **args)


# --------------------------------------------------------------------------------------------- graph logic


def test_potential_edges_spatial_excludes_self_loops_temporal_includes_them():
    spatial = graph.potential_edges(CODING, spatial=True)
    temporal = graph.potential_edges(CODING, spatial=False)
    assert len(spatial) == 6 and len(temporal) == 9
    assert all(a != b for a, b in spatial)
    assert ("programmer", "programmer") in temporal
    assert spatial[:2] == [("analyst", "programmer"), ("analyst", "inspector")]  # row-major, agent order


def test_logits_and_sigmoid():
    assert graph.probability_logit(0.5) == 0.0
    assert graph.sigmoid(graph.probability_logit(0.8)) == pytest.approx(0.8)
    assert graph.sigmoid(graph.probability_logit(1.0)) == 1.0 and graph.sigmoid(graph.probability_logit(0.0)) == 0.0
    assert graph.sigmoid(-800.0) == 0.0 and graph.sigmoid(800.0) == 1.0  # no overflow
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        graph.probability_logit(1.5)
    edges = graph.potential_edges(CODING, spatial=True)
    logits = graph.edge_logits(edges, 0.5, {"analyst->programmer": 2.0})
    assert logits["analyst->programmer"] == 2.0 and logits["programmer->inspector"] == 0.0
    with pytest.raises(ValueError, match="analyst->analyst"):
        graph.edge_logits(edges, 0.5, {"analyst->analyst": 1.0})


def test_prune_count():
    assert graph.prune_count(6, 0.0) == 0
    assert graph.prune_count(6, 0.25) == 2       # 1.5 rounded half up
    assert graph.prune_count(9, 0.25) == 2       # 2.25
    assert graph.prune_count(12, 0.01) == 1      # a positive ratio prunes at least one edge
    assert graph.prune_count(2, 0.9) == 1        # never every edge
    with pytest.raises(ValueError, match="pruning_ratio"):
        graph.prune_count(6, 1.0)


def test_prune_mask_removes_the_lowest_logits_whatever_the_seed():
    edges = graph.potential_edges(CODING, spatial=True)
    logits = {graph.edge_key(e): float(i) for i, e in enumerate(edges)}  # a trained graph: distinct logits
    for seed in range(5):
        mask = graph.prune_mask(edges, logits, 0.34, random.Random(seed))
        assert [k for k, kept in mask.items() if not kept] == ["analyst->programmer", "analyst->inspector"]


def test_prune_mask_of_an_untrained_graph_is_seeded():
    edges = graph.potential_edges(MATH, spatial=True)
    logits = graph.edge_logits(edges, 0.5)
    masks = [graph.prune_mask(edges, logits, 0.25, random.Random(seed)) for seed in range(6)]
    assert masks[0] == graph.prune_mask(edges, logits, 0.25, random.Random(0))
    assert all(sum(not kept for kept in m.values()) == 3 for m in masks)   # 12 edges * 0.25
    assert len({tuple(sorted(m.items())) for m in masks}) > 1


def test_sampled_spatial_graphs_are_dags_and_respect_the_mask():
    edges = graph.potential_edges(MATH, spatial=True)
    logits = graph.edge_logits(edges, 0.7)
    mask = graph.prune_mask(edges, logits, 0.25, random.Random(3))
    for seed in range(50):
        chosen = graph.sample_spatial_edges(edges, logits, mask, random.Random(seed))
        assert all(mask[graph.edge_key(e)] for e in chosen)
        order = graph.topological_order(MATH, chosen)  # raises on a cycle
        position = {a: i for i, a in enumerate(order)}
        assert all(position[a] < position[b] for a, b in chosen)


def test_certain_edges_keep_every_edge_that_closes_no_cycle():
    edges = graph.potential_edges(CODING, spatial=True)
    logits = graph.edge_logits(edges, 1.0)
    keep_all = {graph.edge_key(e): True for e in edges}
    chosen = graph.sample_spatial_edges(edges, logits, keep_all, random.Random(0))
    assert chosen == [("analyst", "programmer"), ("analyst", "inspector"), ("programmer", "inspector")]
    assert graph.topological_order(CODING, chosen) == CODING
    none = graph.sample_spatial_edges(edges, graph.edge_logits(edges, 0.0), keep_all, random.Random(0))
    assert none == []


def test_temporal_edges_start_in_the_second_round():
    edges = graph.potential_edges(CODING, spatial=False)
    logits = graph.edge_logits(edges, 1.0)
    keep_all = {graph.edge_key(e): True for e in edges}
    assert graph.sample_temporal_edges(edges, logits, keep_all, random.Random(0), 0) == []
    assert graph.sample_temporal_edges(edges, logits, keep_all, random.Random(0), 1) == edges


def test_topological_order_is_fifo_in_agent_order_and_rejects_cycles():
    assert graph.topological_order(CODING, []) == CODING
    assert graph.topological_order(CODING, [("inspector", "analyst")]) == ["programmer", "inspector", "analyst"]
    assert graph.topological_order(MATH, [("programmer", "math_solver"), ("inspector", "analyst")]) == [
        "programmer", "inspector", "math_solver", "analyst"]
    with pytest.raises(ValueError, match="cycle"):
        graph.topological_order(CODING, [("analyst", "programmer"), ("programmer", "analyst")])
    with pytest.raises(ValueError, match="not in the graph"):
        graph.topological_order(CODING, [("analyst", "critic")])


def test_schedule_is_a_pure_function_of_its_arguments():
    a, b = _plan(0), _plan(0)
    assert a == b and json.loads(json.dumps(a)) == a
    other = _plan(1)
    assert other["spatial"]["mask"] != a["spatial"]["mask"]
    assert other["round_graphs"] != a["round_graphs"]
    assert a["decision"] == {"node": "decision", "sees": CODING}
    assert a["round_graphs"][0]["temporal"] == []
    for plan in (a, other, _plan(7, MATH, rounds=3)):
        assert len(plan["round_graphs"]) == plan["rounds"]
        for g in plan["round_graphs"]:
            assert not set(g["spatial"]) & set(plan["spatial"]["pruned"])
            assert not set(g["temporal"]) & set(plan["temporal"]["pruned"])
            assert sorted(g["order"]) == sorted(plan["agents"])
            done: set[str] = set()
            for agent in g["order"]:  # every spatial predecessor runs first
                assert set(graph.predecessors(g["spatial"], agent, plan["agents"])) <= done
                done.add(agent)


def test_schedule_with_trained_logits_and_no_pruning():
    plan = _plan(0, pruning_ratio=0.0, spatial_probability=1.0, temporal_probability=0.0)
    assert plan["spatial"]["pruned"] == [] and plan["spatial"]["logits"]["analyst->programmer"] == "inf"
    assert all(g["temporal"] == [] for g in plan["round_graphs"])
    assert plan["round_graphs"][1]["spatial"] == ["analyst->programmer", "analyst->inspector", "programmer->inspector"]
    trained = _plan(0, spatial_logits={"inspector->programmer": -5.0, "programmer->analyst": -4.0})
    assert trained["spatial"]["pruned"] == ["programmer->analyst", "inspector->programmer"]  # in edge order
    with pytest.raises(ValueError, match="rounds"):
        _plan(0, rounds=0)
    with pytest.raises(ValueError, match="distinct"):
        _plan(0, agents=["analyst", "analyst"])


def test_predecessors_are_in_agent_order():
    edges = ["inspector->programmer", "analyst->programmer", "programmer->inspector"]
    assert graph.predecessors(edges, "programmer", CODING) == ["analyst", "inspector"]
    assert graph.predecessors(edges, "analyst", CODING) == []


# --------------------------------------------------------------------------------------------- text helpers


def test_extract_code_and_prefix():
    text = "Plan.\n```python\nx = 1\n```\nThen:\n```python\ndef add(a, b):\n    return a + b\n```\n```bash\nls\n```"
    assert graph.extract_code(text, "add") == "def add(a, b):\n    return a + b\n"
    assert graph.extract_code("```python\nprint(18)\n```") == "print(18)\n"
    assert graph.extract_code("no code here") is None
    prefix = "def add(a, b):\n    \"\"\"Sum.\"\"\"\n"
    assert graph.with_prefix("    return a + b\n", prefix, "add") == prefix + "    return a + b\n"
    assert graph.with_prefix("def add(a, b):\n    return a + b\n", prefix, "add").startswith(prefix.rstrip() + "\n\n")
    assert graph.with_prefix("x\n", None, "add") == "x\n"


def test_answers():
    assert graph.answer_span("Paris is the capital.\nAnswer: Paris.") == "Paris"
    assert graph.answer_span("I think the answer is **Ottawa**\nbecause ...") == "Ottawa"
    assert graph.answer_span("no marker\n\nlast line") == "last line"
    assert graph.final_answer_of("qa", "x\nAnswer: yes") == "yes"
    assert graph.final_answer_of("math", "so\nAnswer: 18") == "so\nAnswer: 18"


def test_fill_and_test_report():
    assert graph.fill("a ${x} ${y}", "t", x="${y}", y=1) == "a ${y} 1"
    with pytest.raises(KeyError, match=r"\$\{z\}"):
        graph.fill("${z}", "t", x=1)
    ok, report = graph.test_report({"tests": [{"test": "assert f() == 1", "passed": True}]}, ["assert f() == 1"])
    assert ok and report.startswith("Visible tests: 1 run, 1 passed, 0 failed.")
    bad, report = graph.test_report({"tests": [{"test": "assert f() == 1", "passed": False,
                                                "error": "AssertionError", "got": "2"}]}, ["assert f() == 1"])
    assert not bad and "FAILED: assert f() == 1" in report and "returned 2" in report
    assert graph.test_report({"error": "SyntaxError: x"}, ["t"]) == (False, "The code could not be run:\nSyntaxError: x")


def test_code_runs_in_a_fresh_interpreter_with_stable_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {"kind": "coding", "roles": CODING, "titles": {}, "entry_point": "add", "per_test_timeout_s": 1,
              "code_timeout_s": 20, "visible_tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
              "prompts": {"execution": "ran:\n${report}"}}
    episode = graph.Episode({"run_id": "r", "gateway_url": "http://127.0.0.1:1", "config": config})
    shared, step = episode.run_code("```python\ndef add(a, b):\n    return a - b\n```")
    assert step["kind"] == "tool" and step["agent"] == "programmer" and step["metadata"]["passed"] is False
    assert shared.startswith("ran:\nVisible tests: 2 run, 1 passed, 1 failed.") and "returned -1" in shared
    assert episode.run_code("no code") is None and len(episode.steps) == 1
    result = episode.execute("script", "print(18)\nexit()\n", [])
    assert "error" not in result and result["stdout"] == "18\n"
    result = episode.execute("script", "print(1)\n1 / 0\n", [])
    assert result["stdout"] == "1\n" and 'File "program.py", line 2' in result["error"]
    assert str(tmp_path) not in result["error"]  # no paths that differ between runs
    result = episode.execute("tests", "def add(a, b):\n    while True:\n        pass\n", ["assert add(1, 2) == 3"])
    assert "TimeoutError" in result["tests"][0]["error"]
    assert "does not define `add`" in episode.execute("tests", "x = 1\n", ["assert add(1, 2) == 3"])["error"]


# --------------------------------------------------------------------------------------------- adapter config


def test_adapter_is_registered_and_builds_its_config():
    from rootstep.adapters import adapter_class, get_adapter, list_adapters

    assert "agentprune" in list_adapters()
    cls = adapter_class("agentprune")
    assert cls.task_kinds == ("coding", "math", "qa") and cls.image.name == "fw-agentprune"
    assert any(r.startswith("openai==") for r in cls.image.requirements)
    cfg = get_adapter("agentprune").episode_config(add_task())
    assert cfg["roles"] == CODING and cfg["seed"] == 0 and cfg["rounds"] == 2 and cfg["pruning_ratio"] == 0.25
    assert cfg["visible_tests"] == ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]
    assert set(cfg["prompts"]["system"]) == {*CODING, "decision"}
    assert "${output}" in cfg["prompts"]["peer"] and "${report}" in cfg["prompts"]["execution"]
    assert cfg["prompts"]["task"].startswith("The task is:") and "def add(a, b)" not in cfg["prompts"]["task"]
    json.dumps(cfg)
    seeded = get_adapter("agentprune", seed=3)
    assert seeded.episode_config(add_task())["seed"] == 3
    assert seeded.config_hash(add_task()) != get_adapter("agentprune").config_hash(add_task())


def test_adapter_config_per_task_kind():
    from rootstep.adapters import get_adapter

    adapter = get_adapter("agentprune")
    math = Task(benchmark="gsm8k", task_id="m", kind="math", verifier="numeric", prompt="1+1?", ground_truth="2")
    assert adapter.episode_config(math)["roles"] == MATH
    qa = Task(benchmark="hotpotqa", task_id="q", kind="qa", verifier="qa", prompt="Capital of France?",
              ground_truth="Paris", metadata={"paragraphs": [{"title": "France", "sentences": ["Paris is its capital. "]}]})
    cfg = adapter.episode_config(qa)
    assert cfg["roles"] == ["analyst", "math_solver", "inspector"]
    assert "[1] France: Paris is its capital." in cfg["prompts"]["task"]
    assert "Answer: <short answer>" in cfg["prompts"]["system"]["decision"]
    humaneval = Task(benchmark="humaneval", task_id="h", kind="coding", verifier="code_tests",
                     prompt='def inc(x):\n    """Add one.\n    >>> inc(1)\n    2\n    >>> inc(-1)\n    0\n    """\n',
                     metadata={"entry_point": "inc", "prefix": "def inc(x):\n"})
    cfg = adapter.episode_config(humaneval)
    assert cfg["visible_tests"] == ["assert inc(1) == 2", "assert inc(-1) == 0"] and cfg["prefix"] == "def inc(x):\n"
    with pytest.raises(ValueError, match="runs coding, math, qa tasks"):
        adapter.run(Task(benchmark="x", task_id="a", kind="agentic", verifier="exact", prompt="p"), "scripted/x")


def test_adapter_options_are_validated():
    from rootstep.adapters import get_adapter

    with pytest.raises(ValueError, match="pruning_ratio"):
        get_adapter("agentprune", pruning_ratio=1.5).episode_config(add_task())
    with pytest.raises(ValueError, match="roles"):
        get_adapter("agentprune", roles=["coder"]).episode_config(add_task())
    with pytest.raises(ValueError, match="spatial_logits: edge 'analyst->analyst'"):
        get_adapter("agentprune", spatial_logits={"analyst->analyst": 1.0}).episode_config(add_task())
    cfg = get_adapter("agentprune", roles=["programmer", "inspector"], rounds=1).episode_config(add_task())
    assert cfg["roles"] == ["programmer", "inspector"] and set(cfg["prompts"]["system"]) == {"programmer", "inspector", "decision"}


def test_tool_use_config_on_a_bfcl_task():
    from rootstep.adapters import get_adapter
    from rootstep.benchmarks import load_tasks

    bfcl = load_tasks("bfcl", limit=1)[0]
    cfg = get_adapter("agentprune").episode_config(bfcl)
    assert (cfg["tools"], cfg["roles"], cfg["rounds"], cfg["max_calls_per_turn"]) == ("bfcl", ["analyst", "inspector"], 1, 6)
    assert set(cfg["prompts"]["system"]) == {"analyst", "inspector", "decision"}
    assert "- mkdir(dir_name): " in cfg["prompts"]["system"]["analyst"]  # the functions, named for the planners
    assert "${request}" in cfg["prompts"]["task"] and "${results}" in cfg["prompts"]["task"]
    assert get_adapter("agentprune", rounds=2).episode_config(bfcl)["rounds"] == 2  # an explicit option stands
    with pytest.raises(ValueError, match=r"roles: \['programmer'\] must be distinct names among analyst, inspector"):
        get_adapter("agentprune", roles=["programmer"]).episode_config(bfcl)
    # the option is the tool-use team's alone: another task's config (and its hash) does not carry it
    assert "max_calls_per_turn" not in get_adapter("agentprune").episode_config(add_task())


# --------------------------------------------------------------------------------------------- Docker

RIGHT = "Here is the implementation.\n```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "Here is the implementation.\n```python\ndef add(a, b):\n    return a - b\n```"
FIX = "The function must return a + b: the sum, not the difference."
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _programmer(messages, params):
    """Writes the wrong function unless someone it hears from said the fix."""
    return RIGHT if "must return a + b" in last_message_text(messages) else WRONG


def _decision(messages, params):
    """Takes the last function shown to it, as written."""
    blocks = [b for b in _BLOCK.findall(last_message_text(messages)) if "def add" in b]
    return "Final code:\n```python\n" + (blocks[-1] if blocks else "pass\n") + "```"


def _scripts():
    from rootstep.gateway import register_script

    register_script("ap-test-analyst", lambda m, p: "Plan: take a and b and combine them into the result.")
    register_script("ap-test-inspector", lambda m, p: "Looks fine to me.")  # careless: never objects
    register_script("ap-test-programmer", _programmer)
    register_script("ap-test-programmer-right", lambda m, p: RIGHT)
    register_script("ap-test-decision", _decision)


def _models(programmer: str = "scripted/ap-test-programmer") -> dict[str, str]:
    return {"programmer": programmer, "inspector": "scripted/ap-test-inspector",
            "decision": "scripted/ap-test-decision"}


@pytest.fixture(scope="module")
def env(tmp_path_factory, docker_sandbox):
    _scripts()
    yield from framework_env("agentprune", tmp_path_factory, docker_sandbox)


@pytest.fixture(scope="module")
def failed(env):
    return env["adapter"].run(add_task(), "scripted/ap-test-analyst", agent_models=_models())


def _shape(t):
    return [(s.agent, s.kind) for s in t.steps]


def _expected_shape(plan) -> list[tuple[str, str]]:
    shape = [("user", "human")]
    for g in plan["round_graphs"]:
        for agent in g["order"]:
            shape.append((agent, "agent"))
            if agent == "programmer":
                shape.append(("programmer", "tool"))
    return shape + [("decision", "agent")]


@pytest.mark.docker
def test_coding_task_succeeds(env):
    t = env["adapter"].run(add_task(), "scripted/ap-test-analyst", agent_models=_models("scripted/ap-test-programmer-right"))
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert t.framework == "agentprune" and t.recording.framework_version == "2.54.0"
    plan = t.metadata["agentprune"]
    assert plan == _plan(0) and t.steps[0].metadata["graph"] == plan  # the recorded graph is the seed's
    assert _shape(t) == _expected_shape(plan)
    tools = [s for s in t.steps if s.kind == "tool"]
    assert len(tools) == 2 and all(s.content.startswith("Visible tests: 3 run, 3 passed") for s in tools)
    assert tools[0].tool_calls[0]["name"] == "run_visible_tests"
    assert t.verdict.success and t.verdict.details["passed"] == 3
    # every LLM step is linked to exactly the call that produced it, by its agent; the others to none
    calls = {c.id: c for c in env["gateway"].calls(t.recording.gateway_run_id)}
    assert len(calls) == 7 and t.metadata["unlinked_calls"] == []  # 3 agents x 2 rounds + decision
    for step in t.steps:
        if step.kind == "agent":
            (call,) = [calls[i] for i in step.call_ids]
            assert (call.agent, call.step_index, call.purpose, call.mode) == (step.agent, step.index, "step", "live")
        else:
            assert step.call_ids == []
    # each agent heard exactly its sampled predecessors
    for step in t.steps:
        if step.kind == "agent" and step.agent != "decision":
            g = plan["round_graphs"][step.metadata["round"]]
            assert step.metadata["spatial_from"] == graph.predecessors(g["spatial"], step.agent, CODING)
            assert step.metadata["temporal_from"] == graph.predecessors(g["temporal"], step.agent, CODING)
            request = calls[step.call_ids[0]].request["messages"]
            assert request[0]["role"] == "system" and "The task is:" in request[1]["content"]
            for source in CODING:
                heard = f"Agent {source} as the" in request[1]["content"]
                assert heard == (source in step.metadata["spatial_from"] + step.metadata["temporal_from"])


@pytest.mark.docker
def test_coding_task_fails(failed):
    assert "error" not in failed.metadata, failed.metadata.get("traceback")
    assert _shape(failed) == _expected_shape(failed.metadata["agentprune"])
    tool = next(s for s in failed.steps if s.kind == "tool")
    assert "0 passed, 3 failed" in tool.content and "the call returned -1" in tool.content
    assert "return a - b" in failed.final_answer
    assert failed.verdict.success is False and failed.verdict.details["passed"] == 0


@pytest.mark.docker
def test_exact_replay_reproduces_the_run_with_zero_live_calls(env, failed):
    r = assert_exact_replay(env, failed, replayed_calls=7)
    assert r.metadata["agentprune"] == failed.metadata["agentprune"]


@pytest.mark.docker
def test_intervention_on_the_inspector_flips_the_outcome(env, failed):
    plan = failed.metadata["agentprune"]
    t = next(s.index for s in failed.steps if s.agent == "inspector")  # its first message: no useful advice
    first = plan["round_graphs"][0]
    # the graph carries the inspector's round-0 message to the programmer (this round, or the next one)
    assert ("inspector->programmer" in first["spatial"]
            or "inspector->programmer" in plan["round_graphs"][1]["temporal"])
    r = env["adapter"].replay(failed, Intervention(run_id=failed.id, step=t, new_content=FIX))
    info = r.replay
    assert info.prefix_identical is True and info.forced_calls == 1 and info.live_calls > 0
    assert [s.content_key() for s in r.steps[:t]] == [s.content_key() for s in failed.steps[:t]]
    assert r.steps[t].content == FIX and r.steps[t].agent == "inspector"
    assert _shape(r) == _shape(failed)  # same graph (same seed): the same agents in the same order
    assert any(s.kind == "tool" and "3 passed" in s.content for s in r.steps[t + 1:])
    assert "return a + b" in r.final_answer
    assert r.verdict.success is True and failed.verdict.success is False


@pytest.mark.docker
def test_the_seed_decides_the_recorded_mask(env, failed, docker_sandbox):
    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier

    again = env["adapter"].run(add_task(), "scripted/ap-test-analyst", agent_models=_models())
    assert again.metadata["agentprune"] == failed.metadata["agentprune"]
    assert [s.content_key() for s in again.steps] == [s.content_key() for s in failed.steps]
    other = get_adapter("agentprune", gateway=env["server"], verifier=default_verifier(docker_sandbox),
                        timeout_s=300, seed=1)
    t = other.run(add_task(), "scripted/ap-test-analyst", agent_models=_models())
    assert "error" not in t.metadata, t.metadata.get("traceback")
    plan = t.metadata["agentprune"]
    assert plan["seed"] == 1 and plan == _plan(1)
    assert plan["spatial"]["mask"] != failed.metadata["agentprune"]["spatial"]["mask"]
    assert _shape(t) == _expected_shape(plan)
    assert t.config_hash != failed.config_hash


@pytest.mark.docker
def test_intervention_on_a_tool_step_is_refused(env, failed):
    tool = next(s.index for s in failed.steps if s.kind == "tool")
    with pytest.raises(ValueError, match="only LLM-produced agent steps"):
        env["adapter"].replay(failed, Intervention(run_id=failed.id, step=tool, new_content="x"))


@pytest.mark.docker
def test_math_task(env):
    from rootstep.gateway import register_script

    task = Task(benchmark="gsm8k", task_id="eggs", kind="math", verifier="numeric", ground_truth="18",
                prompt="Janet's ducks lay 16 eggs per day. She eats three and bakes muffins with four. "
                       "She sells the rest at $2 per egg. How many dollars does she make every day?")
    register_script("ap-test-math", lambda m, p: "16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\nAnswer: 18")
    register_script("ap-test-math-programmer", lambda m, p: "```python\nprint((16 - 3 - 4) * 2)\n```\nAnswer: 18")
    t = env["adapter"].run(task, "scripted/ap-test-math", agent_models={"programmer": "scripted/ap-test-math-programmer"})
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert {s.agent for s in t.steps if s.kind == "agent"} == {*MATH, "decision"}
    tools = [s for s in t.steps if s.kind == "tool"]
    assert len(tools) == 2 and all(s.content == "Output:\n18" for s in tools)
    assert t.final_answer.endswith("Answer: 18") and t.verdict.success is True
    assert len(env["gateway"].calls(t.recording.gateway_run_id)) == 9  # 4 agents x 2 rounds + decision


@pytest.mark.docker
def test_qa_task(env):
    from rootstep.gateway import register_script

    task = Task(benchmark="hotpotqa", task_id="cap", kind="qa", verifier="qa", ground_truth="Paris",
                prompt="What is the capital of the country whose national anthem is La Marseillaise?",
                metadata={"paragraphs": [{"title": "France", "sentences": ["La Marseillaise is the anthem of France.",
                                                                            " Its capital is Paris."]}]})
    register_script("ap-test-qa", lambda m, p: "The anthem is France's; its capital is Paris.\nAnswer: Paris")
    t = env["adapter"].run(task, "scripted/ap-test-qa")
    assert "error" not in t.metadata, t.metadata.get("traceback")
    assert "Its capital is Paris." in t.steps[0].content
    assert [s.kind for s in t.steps].count("tool") == 0
    assert t.final_answer == "Paris" and t.verdict.success is True


def test_who_reads_whom_from_a_real_run():
    """AgentPrune's edges, as the driver recorded them in a real run (MBPP 310, agents on the local 0.5B),
    become each agent step's inputs: the task, the spatial predecessors of its round, the temporal ones of
    the last round (a programmer's output includes the tool step that ran its code), the decision the last
    round; the analyzer's prompt marks them."""
    import json
    from pathlib import Path

    from rootstep.adapters._agentprune import AgentPruneAdapter
    from rootstep.adapters import with_adapter_reads
    from rootstep.prompts import render_steps
    from rootstep.model import Trajectory

    data = json.loads((Path(__file__).parent / "fixtures" / "real_runs" / "agentprune_mbpp_310.json").read_text())
    run = Trajectory.model_validate({k: v for k, v in data.items() if k != "source"})
    assert AgentPruneAdapter.reads(run) == {1: [0], 2: [0], 3: [0, 2], 5: [0, 2, 3, 4], 7: [0, 3, 4, 5, 6],
                                           8: [0, 1, 5, 6, 7], 9: [0, 5, 6, 7, 8]}
    shown = with_adapter_reads(run)
    assert shown.steps[9].metadata["reads"] == [0, 5, 6, 7, 8] and "reads" not in shown.steps[4].metadata
    rendered = {s["index"]: s["reads"] for s in render_steps(shown)[0]}
    assert rendered[8] == [0, 1, 5, 6, 7] and rendered[0] is None
    # a framework whose agents share one chat keeps its steps as they are
    chat = run.model_copy(update={"framework": "ag2"})
    assert with_adapter_reads(chat) is chat


def test_an_episode_cut_by_its_time_limit_is_kept_as_a_failure_with_the_steps_it_made(env, docker_sandbox):
    """The decision node never answers within the episode's 40 s: the driver reports the graph's steps made so far
    before the sandbox's limit, and the run is a failure for the time limit, not a run lost and retried."""
    import time

    from rootstep.adapters import get_adapter
    from rootstep.adapters.base import default_verifier
    from rootstep.gateway import register_script

    register_script("ap-test-decision-asleep", lambda m, p: (time.sleep(45), "Final code: none")[1])
    adapter = get_adapter("agentprune", gateway=env["server"], verifier=default_verifier(docker_sandbox), timeout_s=40)
    t = adapter.run(add_task(), "scripted/ap-test-analyst",
                    agent_models={**_models(), "decision": "scripted/ap-test-decision-asleep"})
    assert t.verdict.success is False and t.verdict.details == {"failure": "time limit", "time_limit_s": 40.0}
    assert t.metadata["error"] == "time limit: the episode was cut after 40 s"
    made = _shape(t)
    assert made[0] == ("user", "human") and ("decision", "agent") not in made
    assert made.count(("programmer", "tool")) == made.count(("programmer", "agent")) >= 1
