"""AgentPrune (Zhang et al., "Cut the Crap: An Economical Communication Pipeline for LLM-based Multi-Agent
Systems", ICLR 2025), reimplemented from the paper (its repository has no licence), run inside the sandbox.

Standard library + `openai` only. The multi-agent system is a graph over role agents:

- **Spatial edges** `a->b`: within a round, `b` runs after `a` and sees `a`'s output of that round. All
  ordered pairs of distinct agents are potential spatial edges; an edge that would close a cycle is not
  added, so every round's spatial graph is a DAG and agents run in its topological order.
- **Temporal edges** `a->b` (self-loops included): in round r > 0, `b` sees `a`'s output of round r-1.
- **Communication mask (one-shot pruning).** Each potential edge has a logit (from the initial edge
  probability, or given per edge). Before the episode, the `pruning_ratio` share of the spatial edges
  with the lowest logits is masked out, and likewise for the temporal edges (AgentPrune's mask update,
  applied once). Without a trained graph every logit is equal: which edges are pruned is then a seeded
  random order of the ties.
- **Sampling.** Each round, every unmasked edge is kept with probability sigmoid(logit / temperature),
  drawn from a generator seeded by the episode's `seed`, so a replay builds the same graphs.
- **Decision.** After `rounds` rounds, the `decision` node sees every agent's last output and answers.

All the graph logic is in pure functions at the top of this file (no I/O; unit-tested on the host), and
the whole schedule (mask, per-round edges, order) is computed before the first call and recorded in
step 0's metadata. Every agent answer is one `agent` step (one LLM call, at
`<gateway>/run/<id>/agent/<agent>/v1`); the `programmer`'s code is run in this container after its
answer, a `tool` step of the programmer (against the task's visible tests for coding tasks; its printed
output otherwise), and what its successors see is its answer plus that result.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import time
from typing import Any, Iterable

import _episode

DECISION = "decision"
ROLES = ("math_solver", "analyst", "programmer", "inspector")

# ---------------------------------------------------------------------------------------------------
# Pure graph logic (no I/O)
# ---------------------------------------------------------------------------------------------------

Edge = tuple[str, str]


def edge_key(edge: Edge) -> str:
    return f"{edge[0]}->{edge[1]}"


def parse_edge(key: str) -> Edge:
    src, sep, dst = key.partition("->")
    if not sep or not src or not dst:
        raise ValueError(f"edge {key!r} is not written as 'source->target'")
    return src, dst


def potential_edges(agents: list[str], *, spatial: bool) -> list[Edge]:
    """Every ordered pair of agents, in agent order (row-major): spatial edges join distinct agents,
    temporal edges include self-loops (an agent sees its own previous answer)."""
    return [(a, b) for a in agents for b in agents if not (spatial and a == b)]


def probability_logit(p: float) -> float:
    """log(p / (1 - p)); +-inf at 1 and 0."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"an edge probability must lie in [0, 1], not {p}")
    if p == 1.0:
        return math.inf
    if p == 0.0:
        return -math.inf
    return math.log(p / (1.0 - p))


def sigmoid(x: float) -> float:
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def edge_logits(edges: list[Edge], probability: float, given: dict[str, float] | None = None) -> dict[str, float]:
    """Each edge's logit: `given[edge]` when set (a trained graph), else the logit of `probability`."""
    given = dict(given or {})
    keys = {edge_key(e) for e in edges}
    unknown = sorted(set(given) - keys)
    if unknown:
        raise ValueError(f"logits given for edges that are not potential edges: {', '.join(unknown)}")
    base = probability_logit(probability)
    return {edge_key(e): float(given.get(edge_key(e), base)) for e in edges}


def prune_count(n_edges: int, ratio: float) -> int:
    """How many of `n_edges` one-shot pruning removes: ratio * n rounded half up, at least one when the
    ratio is positive (as AgentPrune's mask update), never all of them."""
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"pruning_ratio must lie in [0, 1), not {ratio}")
    if ratio == 0.0 or n_edges == 0:
        return 0
    return min(n_edges - 1, max(1, math.floor(ratio * n_edges + 0.5)))


def prune_mask(edges: list[Edge], logits: dict[str, float], ratio: float, rng: random.Random) -> dict[str, bool]:
    """One-shot pruning: edge -> kept. The `prune_count` edges with the lowest logits are masked out;
    ties (every edge, for an untrained graph) are ordered by a random permutation drawn from `rng`."""
    tie_rank = list(range(len(edges)))
    rng.shuffle(tie_rank)
    ranked = sorted(range(len(edges)), key=lambda i: (logits[edge_key(edges[i])], tie_rank[i]))
    pruned = {edge_key(edges[i]) for i in ranked[:prune_count(len(edges), ratio)]}
    return {edge_key(e): edge_key(e) not in pruned for e in edges}


def reaches(edges: Iterable[Edge], start: str, goal: str) -> bool:
    """Whether `goal` can be reached from `start` along `edges` (a node reaches itself)."""
    successors: dict[str, list[str]] = {}
    for a, b in edges:
        successors.setdefault(a, []).append(b)
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        for nxt in successors.get(node, []):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False


def sample_spatial_edges(edges: list[Edge], logits: dict[str, float], mask: dict[str, bool],
                         rng: random.Random, temperature: float = 1.0) -> list[Edge]:
    """One round's spatial graph: potential edges in order; a masked edge or one that would close a
    cycle is skipped (no draw), any other is kept when a draw from `rng` is below sigmoid(logit / T)."""
    if temperature <= 0:
        raise ValueError(f"the edge sampling temperature must be positive, not {temperature}")
    chosen: list[Edge] = []
    for edge in edges:
        if not mask[edge_key(edge)] or reaches(chosen, edge[1], edge[0]):
            continue
        if rng.random() < sigmoid(logits[edge_key(edge)] / temperature):
            chosen.append(edge)
    return chosen


def sample_temporal_edges(edges: list[Edge], logits: dict[str, float], mask: dict[str, bool],
                          rng: random.Random, round_: int, temperature: float = 1.0) -> list[Edge]:
    """One round's temporal edges (to outputs of round `round_` - 1): none in round 0; otherwise every
    unmasked edge kept when a draw from `rng` is below sigmoid(logit / T) (cycles across rounds are fine)."""
    if temperature <= 0:
        raise ValueError(f"the edge sampling temperature must be positive, not {temperature}")
    if round_ == 0:
        return []
    return [e for e in edges if mask[edge_key(e)] and rng.random() < sigmoid(logits[edge_key(e)] / temperature)]


def topological_order(agents: list[str], edges: list[Edge]) -> list[str]:
    """Kahn's algorithm, first-in first-out, starting from the agents with no predecessor in agent order
    (AgentPrune's execution order within a round). ValueError when `edges` have a cycle."""
    indegree = {a: 0 for a in agents}
    successors: dict[str, list[str]] = {a: [] for a in agents}
    for a, b in edges:
        if a not in indegree or b not in indegree:
            raise ValueError(f"edge {edge_key((a, b))} joins an agent that is not in the graph {agents}")
        successors[a].append(b)
        indegree[b] += 1
    queue = [a for a in agents if indegree[a] == 0]
    order: list[str] = []
    while queue:
        node = queue.pop(0)
        order.append(node)
        for nxt in successors[node]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                queue.append(nxt)
    if len(order) != len(agents):
        raise ValueError(f"the spatial edges have a cycle among {sorted(set(agents) - set(order))}")
    return order


def _rng(seed: int, stream: str) -> random.Random:
    # a string seed is hashed with SHA-512 by `random` (stable across Python versions and processes)
    return random.Random(f"agentprune:{seed}:{stream}")


def build_schedule(agents: list[str], *, seed: int, rounds: int, pruning_ratio: float,
                   spatial_probability: float = 0.5, temporal_probability: float = 0.5,
                   edge_temperature: float = 1.0, spatial_logits: dict[str, float] | None = None,
                   temporal_logits: dict[str, float] | None = None) -> dict[str, Any]:
    """The whole communication plan of an episode, a pure function of its arguments: the pruning mask of
    each edge set, then each round's sampled spatial and temporal edges and execution order, then the
    decision node (which sees every agent). Edges are written 'source->target'."""
    if not agents:
        raise ValueError("the graph needs at least one agent")
    if len(set(agents)) != len(agents) or DECISION in agents:
        raise ValueError(f"agents must be distinct and not {DECISION!r}: {agents}")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    plan: dict[str, Any] = {"seed": seed, "agents": list(agents), "rounds": rounds,
                            "pruning_ratio": pruning_ratio, "edge_temperature": edge_temperature}
    sets: dict[str, tuple[list[Edge], dict[str, float], dict[str, bool]]] = {}
    for kind, probability, given in (("spatial", spatial_probability, spatial_logits),
                                     ("temporal", temporal_probability, temporal_logits)):
        edges = potential_edges(agents, spatial=kind == "spatial")
        logits = edge_logits(edges, probability, given)
        mask = prune_mask(edges, logits, pruning_ratio, _rng(seed, f"{kind}-mask"))
        sets[kind] = (edges, logits, mask)
        plan[kind] = {
            "probability": probability,
            "potential": [edge_key(e) for e in edges],
            "logits": {k: (v if math.isfinite(v) else ("inf" if v > 0 else "-inf")) for k, v in logits.items()},
            "mask": mask,
            "pruned": [k for k, kept in mask.items() if not kept],
        }
    plan["round_graphs"] = []
    for r in range(rounds):
        s_edges, s_logits, s_mask = sets["spatial"]
        t_edges, t_logits, t_mask = sets["temporal"]
        spatial = sample_spatial_edges(s_edges, s_logits, s_mask, _rng(seed, f"round{r}-spatial"), edge_temperature)
        temporal = sample_temporal_edges(t_edges, t_logits, t_mask, _rng(seed, f"round{r}-temporal"), r,
                                         edge_temperature)
        plan["round_graphs"].append({
            "round": r,
            "spatial": [edge_key(e) for e in spatial],
            "temporal": [edge_key(e) for e in temporal],
            "order": topological_order(list(agents), spatial),
        })
    plan["decision"] = {"node": DECISION, "sees": list(agents)}
    return plan


def predecessors(edge_keys: list[str], node: str, agents: list[str]) -> list[str]:
    """The sources of the edges into `node`, in agent order."""
    sources = {parse_edge(k)[0] for k in edge_keys if parse_edge(k)[1] == node}
    return [a for a in agents if a in sources]


# ---------------------------------------------------------------------------------------------------
# Pure text helpers
# ---------------------------------------------------------------------------------------------------

_ANSWER = re.compile(r"(?:final answer|answer)\s*(?:is|:)\s*", re.IGNORECASE)


fill = _episode.fill
extract_code = _episode.extract_code


def with_prefix(code: str, prefix: str | None, entry_point: str | None) -> str:
    """The program as the code verifier assembles it: after the task's prefix (HumanEval's signature)
    when it has one, as a whole definition or as a completion of the prefix."""
    if not prefix:
        return code
    if _episode.defines(code, entry_point):
        return prefix.rstrip() + "\n\n" + code
    return prefix + code


def answer_span(text: str) -> str:
    """A QA answer: what follows the last `Answer:` / `answer is` (its first line, without a closing
    period), else the last non-empty line."""
    matches = list(_ANSWER.finditer(text))
    if matches:
        tail = text[matches[-1].end():].strip().splitlines()
        span = tail[0].strip() if tail else ""
    else:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        span = lines[-1] if lines else ""
    return span.strip("*").strip().rstrip(".").strip()


def final_answer_of(kind: str, text: str) -> str:
    """What the verifier judges: the decision's whole answer for coding (the code verifier takes its code
    block) and math (the numeric verifier reads its `Answer:`), the short span for QA."""
    return answer_span(text) if kind == "qa" else text


# ---------------------------------------------------------------------------------------------------
# Code execution (the programmer's tool step)
# ---------------------------------------------------------------------------------------------------

EXEC_MARKER = "<<<AGENTPRUNE_EXEC>>>"

# Runs `program` and then each visible test in a fresh interpreter; one marked JSON line out. Tracebacks
# show only the frames of the program and the tests, under fixed names, so their text (which the next
# agents read) is the same in every run.
_TESTER = r'''
import ast, json, linecache, signal, sys, traceback

spec = json.load(open(sys.argv[1], encoding="utf-8"))
marker = sys.argv[2]


def compiled(name, text):
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    return compile(text, name, "exec")


def trace(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.endswith("tester.py")]
    head = "Traceback (most recent call last):\n" if frames else ""
    return head + "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))


def alarm(signum, frame):
    raise TimeoutError("timed out after %s s" % spec["per_test_timeout"])


def done(result):
    sys.stdout.flush()
    sys.stdout.write("\n" + marker + json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.exit(0)


signal.signal(signal.SIGALRM, alarm)
scope = {"__name__": "__main__" if spec["mode"] == "script" else "solution"}
try:
    signal.alarm(int(spec["per_test_timeout"]))
    exec(compiled("program.py", spec["program"]), scope)
    signal.alarm(0)
except SystemExit as exc:  # a script that calls exit(): fine when it says it succeeded
    signal.alarm(0)
    if spec["mode"] != "script" or exc.code not in (None, 0):
        done({"error": "the program called exit(%r)" % (exc.code,)})
except BaseException as exc:
    signal.alarm(0)
    done({"error": trace(exc)})
if spec["mode"] == "script":
    done({})
entry = spec.get("entry_point")
if entry and entry not in scope:
    done({"error": "the program does not define `%s`" % entry})
results = []
for number, test in enumerate(spec["tests"], start=1):
    name = "visible_test_%d" % number
    local = dict(scope)
    outcome = {"test": test, "passed": True}
    try:
        signal.alarm(int(spec["per_test_timeout"]))
        exec(compiled(name, (spec["setup"] + "\n" if spec["setup"] else "") + test), local)
        signal.alarm(0)
    except BaseException as exc:
        signal.alarm(0)
        outcome = {"test": test, "passed": False, "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()}
        node = None
        try:
            node = ast.parse(test.strip().splitlines()[-1]).body[0]
        except Exception:
            pass
        if isinstance(exc, AssertionError) and isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            try:
                signal.alarm(int(spec["per_test_timeout"]))
                outcome["got"] = repr(eval(compile(ast.Expression(node.test.left), name, "eval"), local))
                signal.alarm(0)
            except BaseException:
                signal.alarm(0)
        elif not isinstance(exc, AssertionError):
            outcome["traceback"] = trace(exc)
    results.append(outcome)
done({"tests": results})
'''


def test_report(result: dict[str, Any], tests: list[str]) -> tuple[bool, str]:
    """(all visible tests passed, the report the next agents read) from the tester's result."""
    if "error" in result:
        return False, f"The code could not be run:\n{result['error'].rstrip()}"
    if not tests:
        return True, "The task shows no tests: the code ran without error."
    outcomes = result.get("tests", [])
    failed = [o for o in outcomes if not o["passed"]]
    lines = [f"Visible tests: {len(outcomes)} run, {len(outcomes) - len(failed)} passed, {len(failed)} failed."]
    for o in failed:
        lines.append(f"FAILED: {o['test']}")
        lines.append(f"  {o['error']}" + (f" (the call returned {o['got']})" if "got" in o else ""))
        if o.get("traceback"):
            lines.append("  " + o["traceback"].rstrip().replace("\n", "\n  "))
    return not failed, "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# The episode
# ---------------------------------------------------------------------------------------------------


class Episode(_episode.StepRecorder):
    """The graph, run round by round (one call = one `agent` step of the agent's role)."""

    def __init__(self, episode: dict[str, Any]):
        super().__init__(episode)
        self.kind = self.cfg["kind"]
        self.prompts = self.cfg["prompts"]
        self.titles = self.cfg["titles"]
        self.agents = list(self.cfg["roles"])
        self._runs = 0
        self.work = os.path.join(os.getcwd(), "agentprune")
        os.makedirs(self.work, exist_ok=True)
        with open(os.path.join(self.work, "tester.py"), "w", encoding="utf-8") as f:
            f.write(_TESTER)

    def call(self, agent: str, user: str, **metadata: Any) -> tuple[str, dict[str, Any]]:
        """One LLM call of `agent` -> one `agent` step whose content is the answer."""
        messages = [{"role": "system", "content": self.prompts["system"][agent]}, {"role": "user", "content": user}]
        return self.chat(agent, messages, self.titles[agent], metadata)

    def execute(self, mode: str, program: str, tests: list[str]) -> dict[str, Any]:
        """Run `program` (mode `tests`: then the visible tests; `script`: as a script, its output kept)
        in a fresh interpreter of this container."""
        self._runs += 1
        spec_path = os.path.join(self.work, f"run{self._runs}.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump({"mode": mode, "program": program, "tests": tests, "setup": self.cfg.get("test_setup") or "",
                       "entry_point": self.cfg.get("entry_point"),
                       "per_test_timeout": self.cfg.get("per_test_timeout_s", 10)}, f)
        timeout = float(self.cfg.get("code_timeout_s", 30))
        try:
            proc = subprocess.run([sys.executable, os.path.join(self.work, "tester.py"), spec_path, EXEC_MARKER],
                                  capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                                  cwd=self.work, errors="replace")
        except subprocess.TimeoutExpired:
            return {"error": f"the code ran longer than {timeout:g} s and was stopped", "stdout": ""}
        stdout, result = proc.stdout, None
        cut = stdout.rfind("\n" + EXEC_MARKER)
        if cut >= 0:
            result = json.loads(stdout[cut + 1 + len(EXEC_MARKER):].splitlines()[0])
            stdout = stdout[:cut]
        if result is None:
            tail = (proc.stderr or "").strip()[-1500:]
            result = {"error": f"the code exited with code {proc.returncode}" + (f":\n{tail}" if tail else "")}
        result["stdout"] = stdout[-4000:]
        return result

    def run_code(self, text: str) -> tuple[str, dict[str, Any]] | None:
        """The programmer's code, run here: a `tool` step; (what the next agents read, the step), or None
        when the answer has no code block."""
        entry = self.cfg.get("entry_point") if self.kind == "coding" else None
        code = extract_code(text, entry)
        if code is None:
            return None
        started = time.time()
        if self.kind == "coding":
            tests = list(self.cfg.get("visible_tests") or [])
            program = with_prefix(code, self.cfg.get("prefix"), entry)
            result = self.execute("tests", program, tests)
            passed, report = test_report(result, tests)
            step = self.add("programmer", "tool", "code execution", report, started,
                            tool_calls=[{"name": "run_visible_tests", "arguments": {"code": program, "tests": tests}}],
                            metadata={"passed": passed, "tests": len(tests)})
            return fill(self.prompts["execution"], "execution", report=report), step
        result = self.execute("script", code, [])
        output = result["stdout"].strip()
        report = (f"Output:\n{output}" if output else "The code printed nothing.")
        if "error" in result:
            report += f"\nError:\n{result['error'].rstrip()}"
        step = self.add("programmer", "tool", "code execution", report, started,
                        tool_calls=[{"name": "run_python", "arguments": {"code": code}}],
                        metadata={"error": "error" in result})
        return fill(self.prompts["execution"], "execution", report=report), step

    def message(self, spatial: list[tuple[str, str]], temporal: list[tuple[str, str]],
                spatial_header: str = "spatial", task: str | None = None) -> str:
        """The user message: the task (`task`, default the episode's), then the outputs of the spatial predecessors
        (this round) and of the temporal predecessors (last round), each section only when it has any."""
        parts = [(self.prompts["task"] if task is None else task).rstrip()]
        for header, infos in ((spatial_header, spatial), ("temporal", temporal)):
            if infos:
                shown = [fill(self.prompts["peer"], "peer", agent=name, title=self.titles[name],
                              output=out.strip()).rstrip() for name, out in infos]
                parts.append(self.prompts[header].rstrip() + "\n\n" + "\n\n".join(shown))
        return "\n\n".join(parts)

    def rounds(self, plan: dict[str, Any], task: str | None = None, **metadata: Any) -> dict[str, str]:
        """The plan's rounds (`task`: the agents' task, default the episode's; `metadata` on every agent step): each
        agent in its round's order, told its spatial and temporal predecessors' outputs; the last round's outputs."""
        previous: dict[str, str] = {}
        for graph in plan["round_graphs"]:
            current: dict[str, str] = {}
            for agent in graph["order"]:
                spatial = [(p, current[p]) for p in predecessors(graph["spatial"], agent, self.agents)]
                temporal = [(p, previous[p]) for p in predecessors(graph["temporal"], agent, self.agents)
                            if p in previous]
                text, _ = self.call(agent, self.message(spatial, temporal, task=task), **metadata, round=graph["round"],
                                    spatial_from=[p for p, _ in spatial], temporal_from=[p for p, _ in temporal])
                shared = text
                if agent == "programmer":
                    executed = self.run_code(text)
                    if executed is not None:
                        shared = text.rstrip() + "\n\n" + executed[0]
                        executed[1]["metadata"]["round"] = graph["round"]
                current[agent] = shared
            previous = current
        return previous

    def run(self, plan: dict[str, Any]) -> str:
        previous = self.rounds(plan)
        inputs = [(a, previous[a]) for a in self.agents]
        text, _ = self.call(DECISION, self.message(inputs, [], spatial_header="final"),
                            round=len(plan["round_graphs"]), spatial_from=[a for a, _ in inputs], temporal_from=[])
        return text


class ToolEpisode(Episode):
    """A BFCL multi-turn episode as an AgentPrune graph: for each user turn the agents' rounds (the turn's request
    and the calls made so far as their task), then the `decision` node, the team's tool-executing agent, with the
    offered functions as tools: it calls them on the sandbox's tool server until it answers in text (each call a
    `tool` step of the decision after the step that asked for it), `max_calls_per_turn` of its calls at most."""

    def __init__(self, episode: dict[str, Any]):
        import _bfcl_tools

        super().__init__(episode)
        self.server = _bfcl_tools.ToolServer(episode["task"])
        self.turn = 0

    def turn_task(self, request: str) -> str:
        return fill(self.prompts["task"], "task", request=request, results=self.server.made())

    def decide(self, request: str, inputs: list[tuple[str, str]]) -> None:
        import _bfcl_tools

        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.prompts["system"][DECISION]},
            {"role": "user", "content": self.message(inputs, [], spatial_header="final", task=self.turn_task(request))}]
        _bfcl_tools.calling_loop(self, self.server, DECISION, self.titles[DECISION], messages, self.turn,
                                 int(self.cfg.get("max_calls_per_turn", 6)), round=int(self.cfg["rounds"]),
                                 spatial_from=[a for a, _ in inputs], temporal_from=[])

    def run_turns(self, plan: dict[str, Any]) -> None:
        import _bfcl_tools

        for turn, request in _bfcl_tools.turns_to_run(self.episode):
            self.turn = turn
            self.server.start_turn(turn)  # miss_func: a held-back function is offered from its turn on
            self.add("user", "human", "user", request, time.time(), metadata={"turn": turn, **({"graph": plan} if turn == 0 else {})})
            previous = self.rounds(plan, self.turn_task(request), turn=turn)
            self.decide(request, [(a, previous[a]) for a in self.agents])


def schedule(cfg: dict[str, Any]) -> dict[str, Any]:
    """The episode's communication plan (`build_schedule`) from its config; its roles checked."""
    unknown = [a for a in cfg["roles"] if a not in ROLES]
    if unknown:
        raise ValueError(f"episode.json config.roles: {unknown} are not agentprune roles ({', '.join(ROLES)})")
    return build_schedule(
        list(cfg["roles"]), seed=int(cfg["seed"]), rounds=int(cfg["rounds"]),
        pruning_ratio=float(cfg["pruning_ratio"]), spatial_probability=float(cfg["spatial_probability"]),
        temporal_probability=float(cfg["temporal_probability"]), edge_temperature=float(cfg["edge_temperature"]),
        spatial_logits=cfg.get("spatial_logits"), temporal_logits=cfg.get("temporal_logits"),
    )


def run_tools(episode: dict[str, Any]) -> dict[str, Any]:
    import openai

    cfg = episode["config"]
    plan = schedule(cfg)
    graph = ToolEpisode(episode)

    def collected() -> dict[str, Any]:
        final = next((s["content"] for s in reversed(graph.steps) if s["agent"] == DECISION and s["kind"] == "agent"
                      and s["content"]), None)
        return {"steps": list(graph.steps), "final_answer": final, "framework_version": openai.__version__}

    return _episode.kept_steps(lambda: graph.run_turns(plan), collected)


def run(episode: dict[str, Any]) -> dict[str, Any]:
    import openai

    cfg = episode["config"]
    plan = schedule(cfg)
    graph = Episode(episode)
    graph.add("user", "human", "task", cfg["prompts"]["task"], time.time(), metadata={"graph": plan})
    result: dict[str, Any] = {"final_answer": None, "framework_version": openai.__version__}

    def work() -> None:
        result["final_answer"] = final_answer_of(graph.kind, graph.run(plan))

    return _episode.kept_steps(work, lambda: {**result, "steps": list(graph.steps)})


if __name__ == "__main__":
    _episode.main(lambda episode: run_tools(episode) if episode["config"].get("tools") else run(episode))
