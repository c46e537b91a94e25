"""AgentPrune (Zhang et al., "Cut the Crap: An Economical Communication Pipeline for LLM-based Multi-Agent
Systems", ICLR 2025) adapter: the published method reimplemented on the `openai` client.

AgentPrune's repository has no licence and no packaging, and `gptswarm` (its MIT base, on PyPI) does
not install in a pinned image (`gptswarm==0.1.0` requires `docx<0.3,>=0.2.4`, which has no wheel, plus
torch, transformers, gradio and `sentence-transformers==2.2.2`, a source distribution): the graph, the
pruning and the rounds are implemented in `_drivers/agentprune_driver.py` (standard library + openai).

| agent | role (by task kind) | steps | LLM calls |
|---|---|---|---|
| `user` | the task | step 0, `human` (its metadata holds the communication graph) | none |
| `math_solver` | Math Solver | `agent` | one per step |
| `analyst` | Algorithm Designer (coding), Mathematical Analyst (math), Knowledgeable Expert (qa) | `agent` | one per step |
| `programmer` | Programming Expert: its code is run in the container after each answer | `agent`, then `tool` | one per `agent` step |
| `inspector` | Test Analyst (coding), Inspector (math), Critic (qa) | `agent` | one per step |
| `decision` | the final decision node: sees every agent's last output, gives the answer (on a tool-use task: calls the functions) | `agent` (last step); `tool` on a tool-use task | one (per call on a tool-use task) |

Rosters (option `roles`): coding analyst, programmer, inspector; math math_solver, analyst, programmer,
inspector; qa analyst, math_solver, inspector. The graph: spatial edges (within a round, a->b: b runs
after a and sees its output), temporal edges (b sees a's output of the previous round), a mask that
one-shot prunes the `pruning_ratio` share of each edge set with the lowest logits (ties, i.e. all edges
of an untrained graph, in a seeded random order), edges sampled each round with probability
sigmoid(logit) from a generator seeded by `seed`, `rounds` rounds, then the decision node. The whole
plan is computed before the first call and recorded: `Trajectory.metadata["agentprune"]` (and step 0's
metadata `graph`). Calls are made one at a time, in each round's topological order.

Coding tasks: the programmer's code runs against the task's visible tests (the `assert` lines and
doctest examples its prompt shows, never the hidden tests); math/qa: the program runs and its printed
output is shown. The final answer is the decision's answer (for qa, the span after its last `Answer:`).

Tool-use tasks (BFCL multi-turn, `tool_use`): each user turn is a `human` step and runs the graph (`TOOL_ROLES`:
`analyst`, a function planner, and `inspector`, a plan checker, told the functions, the turn's request and the calls
made so far; `TOOL_ROUNDS` rounds unless `rounds` is set), then the `decision` node, the team's tool-executing agent,
with the offered functions as OpenAI tools: each call it asks for is a `tool` step of `decision` after its step, run
on the sandbox's tool server, until it answers in text (`max_calls_per_turn` of its calls at most).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rootstep.adapters._images import OPENAI2_CLOSURE, OPENAI2_VERSION
from rootstep.benchmarks import function_summaries, reads_calls, visible_tests
from rootstep.adapters.base import Adapter, with_reads
from rootstep.prompts import render
from rootstep.sandboxes import AGENT_COMPUTE, ImageSpec
from rootstep.model import Task, Trajectory

OPENAI_VERSION = OPENAI2_VERSION

AGENTPRUNE_IMAGE = ImageSpec(name="fw-agentprune", requirements=(*OPENAI2_CLOSURE, *AGENT_COMPUTE))

ROLES = ("math_solver", "analyst", "programmer", "inspector")
DEFAULT_ROLES: dict[str, tuple[str, ...]] = {
    "coding": ("analyst", "programmer", "inspector"),
    "math": ("math_solver", "analyst", "programmer", "inspector"),
    "qa": ("analyst", "math_solver", "inspector"),
}
TITLES: dict[str, dict[str, str]] = {
    "coding": {"math_solver": "Math Solver", "analyst": "Algorithm Designer", "programmer": "Programming Expert",
               "inspector": "Test Analyst", "decision": "Final Decision Maker"},
    "math": {"math_solver": "Math Solver", "analyst": "Mathematical Analyst", "programmer": "Programming Expert",
             "inspector": "Inspector", "decision": "Final Decision Maker"},
    "qa": {"math_solver": "Math Solver", "analyst": "Knowledgeable Expert", "programmer": "Programming Expert",
           "inspector": "Critic", "decision": "Final Decision Maker"},
}
TOOL_ROLES = ("analyst", "inspector")
"""The roster on a tool-use task (BFCL multi-turn): a function planner and a plan checker; the decision node calls."""
TOOL_TITLES = {"analyst": "Function Planner", "inspector": "Plan Checker", "decision": "Final Decision Maker (caller)"}
TOOL_ROUNDS = 1
"""Rounds per user turn on a tool-use task unless the `rounds` option says otherwise: a BFCL run has 1-8 turns, each
its own rounds, and the local models take a minute or more per call there."""


class AgentPruneOptions(BaseModel):
    """The adapter's options (constructor keyword arguments); other keys pass through to the episode."""

    model_config = ConfigDict(extra="allow")

    seed: int = 0
    """Seeds the pruning mask's tie order and every round's edge sampling: same seed, same graphs."""
    rounds: int = Field(2, ge=1, le=10)
    """K: rounds of the agents before the decision node."""
    pruning_ratio: float = Field(0.25, ge=0.0, lt=1.0)
    """Share of each edge set (spatial, temporal) masked out by one-shot pruning."""
    spatial_probability: float = Field(0.5, ge=0.0, le=1.0)
    temporal_probability: float = Field(0.5, ge=0.0, le=1.0)
    """Initial edge probabilities (logit = log(p / (1 - p))) of edges without a given logit."""
    edge_temperature: float = Field(1.0, gt=0.0)
    spatial_logits: dict[str, float] | None = None
    temporal_logits: dict[str, float] | None = None
    """Per-edge logits of a trained graph, `{"analyst->programmer": 1.3, ...}`."""
    roles: list[str] | None = None
    """The agents (default: `DEFAULT_ROLES` of the task kind), in graph order."""
    temperature: float = 0.0
    code_timeout_s: float = Field(30.0, gt=0)
    per_test_timeout_s: float = Field(10.0, gt=0)
    llm_timeout_s: float = Field(600.0, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    max_calls_per_turn: int = Field(6, ge=1)
    """On a tool-use task: the decision node's calls per user turn at most (each may ask for several functions)."""


def _check_logits(field: str, logits: dict[str, float] | None, roles: list[str], spatial: bool) -> None:
    for key in logits or {}:
        src, sep, dst = key.partition("->")
        if not sep or src not in roles or dst not in roles or (spatial and src == dst):
            raise ValueError(f"agentprune option {field}: edge {key!r} is not a potential "
                             f"{'spatial' if spatial else 'temporal'} edge 'source->target' between the roles "
                             f"{', '.join(roles)}" + (" (no self-loops)" if spatial else ""))


DECISION = "decision"
"""The decision node (`_drivers/agentprune_driver.py`): it reads every agent's output of the last round."""


class AgentPruneAdapter(Adapter):
    name = "agentprune"
    package = "rootstep-agentprune (AgentPrune method, reimplemented) on openai"
    version = OPENAI_VERSION
    agents = ("user", "math_solver", "analyst", "programmer", "inspector", "decision")
    answer_agents = (DECISION,)
    step_kinds = {
        "user": ("human",),
        "math_solver": ("agent",),
        "analyst": ("agent",),
        "programmer": ("agent", "tool"),
        "inspector": ("agent",),
        "decision": ("agent", "tool"),
    }
    task_kinds = ("coding", "math", "qa")
    tool_use = True
    driver = "agentprune_driver.py"
    image = AGENTPRUNE_IMAGE

    @classmethod
    def reads(cls, trajectory: Trajectory) -> dict[int, list[int]]:
        """Each agent step's inputs, from the edges its driver recorded (`round`, `spatial_from`,
        `temporal_from` in the step's metadata): the task, the outputs of its spatial predecessors in this
        round and of its temporal predecessors in the last round (the programmer's output includes the run
        of its code, the tool step after it); the decision node reads the last round. On a tool-use run
        (steps with `metadata.turn`) the rounds are per user turn: a step reads its turn's request and every call
        made before it (the calls so far are part of each agent's task), and the decision's later calls in a turn
        read its earlier ones."""
        produced: dict[tuple[Any, str, int], list[int]] = {}
        last: tuple[Any, str, int] | None = None
        requests: dict[Any, int] = {}
        for step in trajectory.steps:
            turn = step.metadata.get("turn")
            if step.kind == "human":
                requests.setdefault(turn, step.index)
            r = step.metadata.get("round")
            if r is None:
                continue
            if step.kind == "agent":
                last = (turn, step.agent, int(r))
                produced.setdefault(last, []).append(step.index)
            elif step.kind == "tool" and last == (turn, step.agent, int(r)):
                produced[last].append(step.index)
        out: dict[int, list[int]] = {}
        for step in trajectory.steps:
            r = step.metadata.get("round")
            if step.kind != "agent" or r is None or "spatial_from" not in step.metadata:
                continue
            r, turn = int(r), step.metadata.get("turn")
            spatial_round = r - 1 if step.agent == DECISION else r
            seen = [requests[turn]] if turn in requests else [s.index for s in trajectory.steps if s.kind == "human"][:1]
            if turn is not None:
                seen += [s.index for s in trajectory.steps if s.kind == "tool" and s.index < step.index]
                if step.agent == DECISION:
                    seen += produced.get((turn, DECISION, r), [])
            for agent in step.metadata.get("spatial_from") or []:
                seen += produced.get((turn, agent, spatial_round), [])
            for agent in step.metadata.get("temporal_from") or []:
                seen += produced.get((turn, agent, r - 1), [])
            out[step.index] = sorted({i for i in seen if i < step.index})
        return out

    def settings(self) -> AgentPruneOptions:
        try:
            return AgentPruneOptions.model_validate(self.options)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"agentprune adapter options: {problems}") from None

    def episode_config(self, task: Task) -> dict[str, Any]:
        options = self.settings()
        if reads_calls(task):
            return self.tool_config(task, options)
        kind = task.kind
        roles = list(options.roles if options.roles is not None else DEFAULT_ROLES[kind])
        if not roles or len(set(roles)) != len(roles) or any(r not in ROLES for r in roles):
            raise ValueError(f"agentprune option roles: {roles} must be distinct names among {', '.join(ROLES)}")
        _check_logits("spatial_logits", options.spatial_logits, roles, spatial=True)
        _check_logits("temporal_logits", options.temporal_logits, roles, spatial=False)
        paragraphs = task.metadata.get("paragraphs") if kind == "qa" else None
        context = {part: render("agentprune_context.j2", part=part, kind=kind)
                   for part in ("spatial", "temporal", "final", "peer", "execution")}
        prompts: dict[str, Any] = {
            "task": render("agentprune_task.j2", kind=kind, question=task.prompt, paragraphs=paragraphs or []),
            "system": {agent: render(f"agentprune_{agent}.j2", kind=kind, answer=self.answer_contract(task))
                       for agent in [*roles, "decision"]},
            **context,
        }
        config: dict[str, Any] = {**options.model_dump(exclude={"max_calls_per_turn"}), "roles": roles, "kind": kind,
                                  "titles": TITLES[kind], "prompts": prompts}
        if kind == "coding":
            config |= {
                "entry_point": task.metadata.get("entry_point"),
                "prefix": task.metadata.get("prefix"),
                "test_setup": task.metadata.get("test_setup") or "",
                "visible_tests": visible_tests(task),
            }
        return config

    def tool_config(self, task: Task, options: AgentPruneOptions) -> dict[str, Any]:
        """The tool-use team (BFCL): `TOOL_ROLES` (or the `roles` option among them) in a graph per user turn, then the
        decision node with the offered functions as tools, `max_calls_per_turn` of its calls at most per turn."""
        roles = list(options.roles if options.roles is not None else TOOL_ROLES)
        if not roles or len(set(roles)) != len(roles) or any(r not in TOOL_ROLES for r in roles):
            raise ValueError(f"agentprune option roles: {roles} must be distinct names among {', '.join(TOOL_ROLES)} "
                             f"on a tool-use task ({task.benchmark})")
        _check_logits("spatial_logits", options.spatial_logits, roles, spatial=True)
        _check_logits("temporal_logits", options.temporal_logits, roles, spatial=False)
        functions = function_summaries(task)
        prompts: dict[str, Any] = {
            "task": render("agentprune_bfcl_task.j2"),
            "system": {agent: render(f"agentprune_bfcl_{agent}.j2", functions=functions) for agent in [*roles, DECISION]},
            **{part: render("agentprune_context.j2", part=part, kind=task.kind)
               for part in ("spatial", "temporal", "final", "peer", "execution")},
        }
        rounds = options.rounds if "rounds" in options.model_fields_set else TOOL_ROUNDS
        return {**options.model_dump(), "rounds": rounds, "roles": roles, "kind": task.kind, "titles": TOOL_TITLES,
                "prompts": prompts, "tools": "bfcl", "max_calls_per_turn": options.max_calls_per_turn}

    def _episode(self, task: Task, ctx: Any, server: Any, sandbox: Any, verifier: Any,
                 parent: Trajectory | None, until_turn: int | None = None) -> Trajectory:
        """The shared episode, with the communication graph the driver recorded in step 0 lifted into
        `metadata["agentprune"]` (seed, masks, per-round edges and order)."""
        trajectory = super()._episode(task, ctx, server, sandbox, verifier, parent, until_turn)
        graph = trajectory.steps[0].metadata.get("graph") if trajectory.steps else None
        if graph is not None:
            trajectory.metadata = {**trajectory.metadata, "agentprune": graph}
        return with_reads(trajectory, self.reads(trajectory))
