"""The two example systems outside the six (issue 14), real framework code in Docker, no edit to rootstep:
`examples/langgraph_supervisor` (LangGraph, attribution by URL) and `examples/openai_agents_handoffs`
(OpenAI Agents SDK handoffs over one client, attribution by system prompt), on GSM8K test-0.

Each: recorded (a realistic slip by the solver that the checker / reviewer waves through, replies from
tests/fixtures/systems/<example>/wrong.json), replayed exactly (zero live calls, same steps), an
intervention on the solver's step that flips the outcome, and a verified counterfactual label at the
solver's step from the annotate flow. The agents' model answers like the fixture's replies: the checker and
reviewer repeat whatever arithmetic the solution they are shown contains.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from rootstep.gateway import register_script
from rootstep.benchmarks import load_tasks
from rootstep.model import Intervention

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "systems"
EXAMPLES = {"langgraph_supervisor": "langgraph-supervisor", "openai_agents_handoffs": "openai-agents-handoffs"}
RIGHT_MARK = "16 - 7 = 9"  # the right solution's step; the slip writes 16 - 7 = 8


def _fixture(example: str, scenario: str) -> dict:
    return json.loads((FIXTURES / example / f"{scenario}.json").read_text())


def _policy(example: str, agent: str):
    """An agent's model: the fixture's replies, chosen by what the request shows (so a replay whose solver
    step was fixed gets the checker's answer to the fixed solution, as the real team would give)."""
    wrong, right = _fixture(example, "wrong")["replies"], _fixture(example, "right")["replies"]

    def reply(messages, params):
        text = "\n".join(str(m.get("content") or "") for m in messages)
        replies = right if RIGHT_MARK in text else wrong
        if agent == "supervisor":
            work = text.split("Work so far:", 1)[-1]
            return "FINISH" if "[checker]" in work else ("NEXT: checker" if "[solver]" in work else "NEXT: solver")
        if agent == "checker":
            return replies["checker"][1 if messages[-1].get("role") == "tool" else 0]
        return replies[agent][0]

    return reply


def _models(example: str, agents: tuple[str, ...]) -> dict[str, str]:
    models = {}
    for agent in agents:
        name = f"ex-{agent}-{uuid.uuid4().hex[:8]}"
        register_script(name, _policy(example, agent))
        models[agent] = f"scripted/{name}"
    return models


def _task():
    [task] = [t for t in load_tasks("gsm8k") if t.task_id == "test-0"]
    return task


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def example(request, docker_sandbox):
    from rootstep.adapters import adapter_class, use_systems
    from rootstep.flows.cli import build_systems

    folder = request.param
    [name] = use_systems([str(ROOT / "examples" / folder / "system.toml")])
    assert name == EXAMPLES[folder]
    build_systems([name])  # resolves the pinned closure once and builds offline; a no-op when built
    return folder, adapter_class(name)


def test_record_replay_and_flip(example, tmp_path):
    from rootstep.gateway import Gateway, GatewayServer

    folder, cls = example
    wrong = _fixture(folder, "wrong")
    agents = tuple(a for a in cls.agents if a != "user")
    models = _models(folder, agents)
    server = GatewayServer(Gateway(tmp_path / "journal")).start()
    try:
        adapter = cls(gateway=server, timeout_s=300)
        run = adapter.run(_task(), models[agents[0]], agent_models=models)
        assert not run.verdict.success and run.final_answer.endswith(wrong["expected"]["answer"]), run.final_answer
        calls = {a: sum(1 for s in run.steps if s.agent == a and s.kind == "agent") for a in agents}
        assert calls == wrong["expected"]["calls"]
        assert sum(1 for s in run.steps if s.kind == "tool") == wrong["expected"]["tool_steps"]

        again = adapter.replay(run)
        assert again.replay.identical and again.replay.live_calls == 0

        solver = next(s for s in run.steps if s.agent == "solver")
        fixed = _fixture(folder, "right")["replies"]["solver"][0]
        fixed = fixed["content"] if isinstance(fixed, dict) else fixed
        flipped = adapter.replay(run, Intervention(run_id=run.id, step=solver.index, new_content=fixed))
        assert flipped.verdict.success and flipped.replay.prefix_identical, flipped.final_answer
        assert flipped.replay.forced_calls == 1
    finally:
        server.stop()


def test_annotate_labels_the_solver(prefect_harness, example, tmp_path):
    from rootstep.annotation import Budget
    from rootstep.flows.annotate import counterfactual
    from rootstep.flows.collect import collect
    from rootstep.warehouse import Warehouse

    folder, cls = example
    agents = tuple(a for a in cls.agents if a != "user")
    models = _models(folder, agents)
    right = _fixture(folder, "right")["replies"]["solver"][0]
    analyzer = f"ex-analyzer-{uuid.uuid4().hex[:8]}"
    wh = tmp_path / "wh"

    def analyze(messages, params):
        # the step numbers come from the prompt's own transcript: find the solver's step
        prompt = "\n".join(str(m.get("content") or "") for m in messages)
        step = next(s.index for s in Warehouse(wh).trajectory(run.run_id).steps if s.agent == "solver")
        assert "16 - 7 = 8" in prompt
        examined = re.search(r"STEP UNDER EXAMINATION: step (\d+) by", prompt)
        if examined and int(examined.group(1)) != step:  # the earlier-steps scan: the routing steps are right
            return json.dumps({"fix_needed": False, "reason": "it only routes the task to the solver"})
        return json.dumps({
            "mistake_step": step, "mistake_agent": "solver",
            "reason": "The solver subtracted wrongly: 16 - 7 is 9, not 8, so Janet sells 9 eggs for $18; the "
                      "checker only re-multiplied the solver's own numbers.",
            "suggested_fix": right["content"] if isinstance(right, dict) else right,
        })

    register_script(analyzer, analyze)
    [run] = collect([cls.name], tasks=[_task()], model=models[agents[0]], agent_models=models,
                    warehouse=str(wh)).runs
    assert run.success is False and run.error is None, run
    # three replays: the solver's stated $16 given the task's answer first (the grounded phase: the checker still
    # fails it, as the example's scripted team does), the analyzer's fix, and room for the scan of the routing steps
    report = counterfactual(f"scripted/{analyzer}", warehouse=str(wh), budget=Budget(max_replays=3))
    [annotated] = report.runs
    assert annotated.status == "labelled" and annotated.verified and annotated.agent == "solver", annotated
    [label] = Warehouse(wh).rows("SELECT agent, method, verified FROM labels WHERE run_id = ?", [run.run_id])
    assert label == {"agent": "solver", "method": "counterfactual", "verified": True}
