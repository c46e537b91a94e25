"""What a verified counterfactual label costs: rootstep's search with prefix replay vs the naive scan.

    .venv/bin/python bench/annotation.py [--runs 16] [--agent-steps 16] [--agent-latency 0.02]

THIS IS A SIMULATION. The "framework" is a small deterministic multi-agent program written here (the
ledger): agents take turns applying one arithmetic operation each to a running value (a tool step
records the value every few steps). Each agent turn is a real HTTP chat-completion call through
rootstep's gateway (record / replay / forced / live, journal fsync'd), answered by the scripted
provider `scripted/sim-agent` with a fixed latency, never by a model. The scripted agent "slips" at one
known step per run (it writes a wrong value that later agents carry on), so the decisive step of every
run is known. The analyzer is scripted too (`scripted/sim-analyzer`, fixed latency): it checks each
step's arithmetic, and it is deliberately imperfect in a deterministic way: for `--symptom-pct` of the
runs it first blames the last agent step (the symptom) and "fixes" it with the expected answer, which
also makes the run succeed; asked about a correct step it proposes a superfluous fix for
`--false-fix-pct` of the steps.

The scripted agent also returns token log-probabilities with each reply (as a provider asked for
`logprobs` does): confident tokens, and one step per run where its confidence dips. In `--prior-signal-pct`
of the runs the dip is at the slip (the premise of score-based attribution), in the others at another
agent step. rootstep's confidence method reads them from the recorded calls and ranks the agent steps:
that ranking is the prior of (c).

Measured in one run, on the same corpus and the same analyzer:
  (a) naive: the sequential scan from step 0: for every agent step, ask for a fix and re-run the whole
      program LIVE with that step forced (no recording used), until the first success;
  (b) rootstep: `find_decisive_step`: analyzer-ranked diagnosis first, then the earlier agent steps
      (the analyzer may judge a step correct: no replay), every replay served from the recording up to
      the intervention (free), live after it;
  (c) rootstep with a prior: (b) where the analyzer is first asked about the steps the confidence ranking
      puts first (`find_decisive_step(..., prior=rank_steps(run, "confidence"))`).
"Live LLM calls" counts every call that reaches a provider: the agents' live calls during replays and
the analyzer's calls. Recording the runs once (the collect stage) is not part of a label's cost and is
reported separately. Labels per minute are for (b) with 1, 4 and 16 searches in parallel threads.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENTS = ("Planner", "Solver", "Checker")
OPS = (("+", 3), ("+", 7), ("-", 4), ("-", 9), ("*", 2), ("*", 3))
LAST_VALUE = re.compile(r"(?:=|value is)\s*(-?\d+)\s*$")
CONTENT = re.compile(r"^(-?\d+) ([+\-*]) (\d+) = (-?\d+)")
FRAMEWORK, BENCHMARK, AGENT_MODEL = "simledger", "sim-arith", "scripted/sim-agent"


def apply(sign: str, k: int, value: int) -> int:
    return value + k if sign == "+" else value - k if sign == "-" else value * k


def pct_hash(*parts: Any) -> int:
    """A deterministic 0..99 from the parts (the simulated analyzer's 'mood')."""
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16) % 100


@dataclass
class SimTask:
    task_id: str
    start: int
    plan: list[tuple[str, str, tuple[str, int] | None]]  # (agent, kind, op)
    slip: int  # the step index at which the scripted agent slips: the known decisive step

    @property
    def truth(self) -> int:
        value = self.start
        for _, kind, op in self.plan:
            if kind == "agent":
                value = apply(op[0], op[1], value)
        return value

    @property
    def question(self) -> str:
        return f"Task {self.task_id}: start at {self.start}; each agent applies its operation to the running value."


def make_corpus(n_runs: int, agent_steps: int, seed: int) -> list[SimTask]:
    corpus = []
    for k in range(n_runs):
        rng = random.Random(seed * 100_003 + k)
        plan: list[tuple[str, str, tuple[str, int] | None]] = []
        for a in range(agent_steps):
            plan.append((AGENTS[a % len(AGENTS)], "agent", rng.choice(OPS)))
            if a % 3 == 2 and a < agent_steps - 1:
                plan.append(("ledger", "tool", None))
        agent_indices = [i for i, p in enumerate(plan) if p[1] == "agent"]
        corpus.append(SimTask(f"sim-{k:03d}", rng.randint(1, 20), plan, rng.choice(agent_indices)))
    return corpus


# --------------------------------------------------------------------------- the scripted models


def dip_step(task: SimTask, signal_pct: int) -> int:
    """Where the scripted agent's confidence dips: the slip in `signal_pct`% of runs, else another agent step."""
    if pct_hash(task.task_id, "signal") < signal_pct:
        return task.slip
    others = [i for i, p in enumerate(task.plan) if p[1] == "agent" and i != task.slip]
    return others[pct_hash(task.task_id, "decoy") % len(others)]


def token_logprobs(task: SimTask, step: int, content: str, signal_pct: int) -> dict[str, Any]:
    """OpenAI-form logprobs of a reply: confident tokens (-0.05..-0.35), about -2.5 at the dip step."""
    dip = step == dip_step(task, signal_pct)
    tokens = content.split(" ")
    return {"content": [
        {"token": t, "logprob": (-2.0 - pct_hash(task.task_id, step, k) / 100) if dip
         else (-0.05 - 0.3 * pct_hash(task.task_id, step, k) / 100), "bytes": list(t.encode()), "top_logprobs": []}
        for k, t in enumerate(tokens)]}


def agent_script(tasks: dict[str, SimTask], signal_pct: int = 70):
    """The scripted agent model: applies the step's operation to the last value in the conversation,
    and slips (adds 7) at the task's known slip step; its replies carry token log-probabilities."""

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        task = tasks[re.search(r"Task (sim-\d+)", messages[0]["content"]).group(1)]
        step = int(re.search(r"^step (\d+):", messages[-1]["content"]).group(1))
        value = task.start
        for m in reversed(messages[:-1]):
            found = LAST_VALUE.search(m.get("content") or "") if m["role"] != "system" else None
            if found:
                value = int(found.group(1))
                break
        sign, k = task.plan[step][2]
        result = apply(sign, k, value) + (7 if step == task.slip else 0)
        content = f"{value} {sign} {k} = {result}"
        return {"content": content, "logprobs": token_logprobs(task, step, content, signal_pct)}

    return answer


def parse_run(prompt: str) -> list[tuple[int, str, str, str]]:
    """(index, agent, kind, content) of every step shown in an analyzer prompt."""
    return [(int(i), agent, "tool" if tool else "agent", content)
            for i, agent, tool, content in re.findall(r"^\[step (\d+)\] (\w+)( \(tool step\))?:\n(.*)$", prompt, re.M)]


def analyzer_script(tasks: dict[str, SimTask], symptom_pct: int, false_fix_pct: int):
    """The scripted analyzer: finds wrong arithmetic, deterministically imperfect (see the docstring)."""

    def consistent(content: str) -> tuple[bool, str | None]:
        m = CONTENT.match(content)
        if not m:
            return False, None
        a, sign, k, v = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
        right = apply(sign, k, a)
        return right == v, f"{a} {sign} {k} = {right}"

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        prompt = messages[-1]["content"]
        task = tasks[re.search(r"Task (sim-\d+)", prompt).group(1)]
        steps = {i: (agent, kind, content) for i, agent, kind, content in parse_run(prompt)}
        examined = re.search(r"STEP UNDER EXAMINATION: step (\d+)", prompt)
        if examined:
            i = int(examined.group(1))
            agent, _, content = steps[i]
            ok, corrected = consistent(content)
            may_decline = '"fix_needed": false' in prompt
            if not ok:
                return json.dumps({"fix_needed": True, "mistake_step": i, "mistake_agent": agent,
                                   "reason": "the arithmetic of this step is wrong", "suggested_fix": corrected})
            if may_decline and pct_hash(task.task_id, i) >= false_fix_pct:
                return json.dumps({"fix_needed": False, "reason": "the arithmetic is right"})
            return json.dumps({"fix_needed": True, "mistake_step": i, "mistake_agent": agent,
                               "reason": "restating the step more carefully", "suggested_fix": "Double-checked: " + content})
        agent_steps = [i for i, (_, kind, _) in sorted(steps.items()) if kind == "agent"]
        tested = {int(s) for s in re.findall(r"^- step (\d+) ", prompt, re.M)}
        last = agent_steps[-1]
        if pct_hash(task.task_id, "symptom") < symptom_pct and last not in tested:
            agent, _, content = steps[last]
            a, sign, k = CONTENT.match(content).group(1, 2, 3)
            return json.dumps({"mistake_step": last, "mistake_agent": agent, "reason": "the final value is wrong",
                               "suggested_fix": f"{a} {sign} {k} = {task.truth}"})
        for i in agent_steps:
            ok, corrected = consistent(steps[i][2])
            if not ok and i not in tested:
                return json.dumps({"mistake_step": i, "mistake_agent": steps[i][0],
                                   "reason": "the arithmetic of this step is wrong", "suggested_fix": corrected})
        return "I cannot find the mistake."

    return answer


# --------------------------------------------------------------------------- the simulated program


class Ledger:
    """Runs the simulated program through the gateway over HTTP, as a framework would."""

    def __init__(self, server: Any, tasks: dict[str, SimTask]):
        self.server = server
        self.gateway = server.gateway
        self.tasks = tasks
        self._local = threading.local()
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def http(self):
        import httpx

        if not hasattr(self._local, "client"):
            self._local.client = httpx.Client(timeout=60)
        return self._local.client

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}-{next(self._ids)}"

    def program(self, run_id: str, task: SimTask, force: dict[int, str] | None = None) -> tuple[list[Any], int | None]:
        """One episode: the steps and the final value. `force` replaces a step's call by given content
        (the naive baseline's intervention, with no recording to serve from)."""
        from rootstep.model import Step

        messages: list[dict[str, Any]] = [{"role": "system", "content": f"You are a team of calculators. {task.question}"}]
        steps, value = [], task.start
        for i, (agent, kind, op) in enumerate(task.plan):
            call_ids: list[str] = []
            if kind == "tool":
                content = f"ledger: value is {value}"
                messages.append({"role": "user", "content": content})
            else:
                request = messages + [{"role": "user", "content": f"step {i}: {agent}, apply {op[0]} {op[1]} to the running value."}]
                if force and i in force:
                    content = force[i]
                else:
                    r = self.http().post(f"{self.server.base_url(run_id, agent)}/chat/completions",
                                         json={"model": "sim", "messages": request, "temperature": 0},
                                         headers={"X-Rootstep-Step": str(i)})
                    r.raise_for_status()
                    content = r.json()["choices"][0]["message"]["content"]
                    call_ids = [r.headers["x-rootstep-call-id"]]
                messages.append({"role": "assistant", "name": agent, "content": content})
            steps.append(Step(index=i, agent=agent, kind=kind, content=content, call_ids=call_ids))
            found = LAST_VALUE.search(content)
            value = int(found.group(1)) if found else None
            if value is None:
                break  # the team cannot go on without a value
        return steps, value

    def trajectory(self, task: SimTask, steps: list[Any], value: int | None, run_id: str, parent: str | None = None):
        from rootstep.model import Recording, Task, Trajectory, Verdict

        verdict = Verdict(success=value == task.truth, score=float(value == task.truth),
                          details={"expected": task.truth, "got": value})
        recorded = Task(benchmark=BENCHMARK, task_id=task.task_id, prompt=task.question, ground_truth=str(task.truth),
                        verifier="numeric", kind="math")
        return Trajectory(framework=FRAMEWORK, benchmark=BENCHMARK, task_id=task.task_id, question=task.question,
                          ground_truth=str(task.truth), steps=steps, final_answer=None if value is None else str(value),
                          verdict=verdict, model=AGENT_MODEL, source="bench/annotation.py (simulation)",
                          parent_run_id=parent, recording=Recording(gateway_run_id=run_id, task=recorded))

    def record(self, task: SimTask):
        from rootstep.gateway import RunContext

        run_id = self.new_id(f"rec-{task.task_id}")
        self.gateway.register(RunContext(run_id=run_id, framework=FRAMEWORK, benchmark=BENCHMARK, model=AGENT_MODEL))
        steps, value = self.program(run_id, task)
        self.gateway.unregister(run_id)
        return self.trajectory(task, steps, value, run_id)

    def prefix_replay(self, task: SimTask, recorded):
        """rootstep's replay: the gateway serves the recording up to the intervention, forces it, goes live."""
        from rootstep.gateway import RunContext
        from rootstep.annotation import ReplayOutcome

        source = recorded.recorded().gateway_run_id
        step_calls = {s.index: list(s.call_ids) for s in recorded.steps if s.call_ids}

        def replay(intervention):
            started = time.perf_counter()
            run_id = self.new_id(f"{source}-rpl")
            self.gateway.register(RunContext(
                run_id=run_id, framework=FRAMEWORK, benchmark=BENCHMARK, model=AGENT_MODEL, mode="replay",
                replay_of=source, intervention=intervention.model_copy(update={"run_id": source}), step_calls=step_calls))
            try:
                steps, value = self.program(run_id, task)
            finally:
                stats = self.gateway.unregister(run_id)
            result = self.trajectory(task, steps, value, run_id, parent=recorded.id)
            cost = stats.usage.model_copy(update={"seconds": time.perf_counter() - started})
            return result, result.verdict, ReplayOutcome(cost=cost, divergence=stats.divergence)

        return replay

    def live_rerun(self, task: SimTask, recorded):
        """The naive baseline's re-simulation: the whole program again, live, with the step forced."""
        from rootstep.gateway import RunContext
        from rootstep.annotation import ReplayOutcome

        def replay(intervention):
            started = time.perf_counter()
            run_id = self.new_id(f"naive-{task.task_id}")
            self.gateway.register(RunContext(run_id=run_id, framework=FRAMEWORK, benchmark=BENCHMARK, model=AGENT_MODEL))
            try:
                steps, value = self.program(run_id, task, force={intervention.step: intervention.new_content})
            finally:
                stats = self.gateway.unregister(run_id)
            result = self.trajectory(task, steps, value, run_id, parent=recorded.id)
            return result, result.verdict, ReplayOutcome(cost=stats.usage.model_copy(update={"seconds": time.perf_counter() - started}))

        return replay


# --------------------------------------------------------------------------- measurement


@dataclass
class Tally:
    """Per-run results of one search method over a corpus, summed over any subset of its runs."""

    per_run: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0

    def subset(self, task_ids: list[str]) -> "Tally":
        return Tally({k: self.per_run[k] for k in task_ids}, self.seconds)

    def total(self, key: str) -> float:
        return sum(r[key] for r in self.per_run.values())

    @property
    def labels(self) -> dict[str, int | None]:
        return {k: r["label"] for k, r in self.per_run.items()}

    @property
    def verified(self) -> int:
        return int(self.total("verified"))

    @property
    def live(self) -> float:
        return self.total("agent_live") + self.total("analyzer_calls")

    def per_label(self, value: float) -> float:
        return value / max(self.verified, 1)


def label_rows(left: Tally, right: Tally, known: dict[str, int]) -> list[tuple[str, str, str]]:
    """The rows every comparison prints: labels, their correctness, live calls per verified label."""
    n = len(known)
    return [
        ("verified labels", f"{left.verified}/{n}", f"{right.verified}/{n}"),
        ("labels equal to the known decisive step", f"{sum(left.labels[k] == v for k, v in known.items())}",
         f"{sum(right.labels[k] == v for k, v in known.items())}"),
        ("live LLM calls per verified label", f"{left.per_label(left.live):.1f}", f"{right.per_label(right.live):.1f}"),
        ("  of which agent calls (replays, live)", f"{left.per_label(left.total('agent_live')):.1f}",
         f"{right.per_label(right.total('agent_live')):.1f}"),
        ("  of which analyzer calls", f"{left.per_label(left.total('analyzer_calls')):.1f}",
         f"{right.per_label(right.total('analyzer_calls')):.1f}"),
    ]


def search_all(ledger: Ledger, corpus: list[SimTask], runs: dict[str, Any], method: str, workers: int,
               priors: dict[str, list[int]] | None = None) -> Tally:
    from rootstep.annotation import Budget, find_decisive_step, sequential_scan
    from rootstep.gateway import Chat

    def one(task: SimTask):
        recorded = runs[task.task_id]
        analyzer = Chat("scripted/sim-analyzer")  # one per search: usage is read per label
        budget = Budget(max_replays=len(recorded.steps), max_llm_calls=3 * len(recorded.steps))
        started = time.perf_counter()
        if method == "naive":
            result = sequential_scan(recorded, analyzer=analyzer, replay=ledger.live_rerun(task, recorded), budget=budget)
        else:
            result = find_decisive_step(recorded, analyzer=analyzer, replay=ledger.prefix_replay(task, recorded), budget=budget,
                                        prior=priors[task.task_id] if priors is not None else None)
        return task.task_id, result, time.perf_counter() - started

    tally = Tally()
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, corpus))
    tally.seconds = time.perf_counter() - started
    for task_id, result, seconds in results:
        divergent = [r for r in result.replays if r.divergence or r.error]
        if divergent:
            raise SystemExit(f"{task_id}: replay diverged or failed: {divergent[0].divergence or divergent[0].error}")
        meta = result.annotation.metadata
        tally.per_run[task_id] = {
            "label": result.step if result.verified else None, "verified": int(result.verified),
            "agent_live": meta["live_calls"], "analyzer_calls": meta["analyzer_calls"],
            "replayed": meta["replayed_calls"], "replays": len(result.replays), "seconds": seconds,
            "cost_llm_calls": result.annotation.cost.llm_calls,
        }
        assert result.annotation.cost.llm_calls == meta["live_calls"] + meta["analyzer_calls"]
    return tally


def prior_section(ledger: Ledger, gateway: Any, corpus: list[SimTask], runs: dict[str, Any], base: Tally,
                  args: argparse.Namespace) -> None:
    """(b) against (c): the same corpus, analyzer and replay, with the confidence ranking as the prior."""
    from rootstep.tracers import rank_steps

    started = time.perf_counter()
    priors = {t.task_id: rank_steps(runs[t.task_id], "confidence", calls=gateway.calls(runs[t.task_id].recorded().gateway_run_id))
              for t in corpus}
    rank_s = time.perf_counter() - started
    hits = sum(priors[t.task_id][0] == t.slip for t in corpus)
    prior = search_all(ledger, corpus, runs, "rootstep", 1, priors)
    prior.seconds = sum(r["seconds"] for r in prior.per_run.values())
    known = {t.task_id: t.slip for t in corpus}
    print()
    print(f"the prior: confidence ranking from the recorded calls' log-probabilities ({rank_s * 1000 / len(corpus):.1f} ms "
          f"per run, no LLM); its first step is the decisive step in {hits}/{len(corpus)} runs "
          f"(signal set to {args.prior_signal_pct}%)")
    print(f"{'concurrency 1':<44}{'(b) rootstep, no prior':>26}{'(c) rootstep + prior':>26}")
    rows = [
        *label_rows(base, prior, known),
        ("replays per verified label", f"{base.per_label(base.total('replays')):.2f}",
         f"{prior.per_label(prior.total('replays')):.2f}"),
        ("wall time per label (s)", f"{base.per_label(base.seconds):.2f}", f"{prior.per_label(prior.seconds):.2f}"),
    ]
    for name, b, c in rows:
        print(f"{name:<44}{b:>26}{c:>26}")
    same = all(prior.labels[k] == base.labels[k] for k in known)
    print(f"same labels with and without the prior: {'yes' if same else 'NO'}; replays (b) / (c) = "
          f"{base.total('replays') / max(prior.total('replays'), 1):.2f}x, live calls (b) / (c) = "
          f"{base.live / max(prior.live, 1):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=16, help="failed runs on which (a) and (b) are compared")
    parser.add_argument("--throughput-runs", type=int, default=48,
                        help="failed runs (a superset) for rootstep's labels per minute at concurrency 1, 4, 16")
    parser.add_argument("--agent-steps", type=int, default=16, help="agent steps per run (plus a tool step every 3)")
    parser.add_argument("--agent-latency", type=float, default=0.02, help="scripted agent latency per call, seconds")
    parser.add_argument("--analyzer-latency", type=float, default=0.04, help="scripted analyzer latency per call, seconds")
    parser.add_argument("--symptom-pct", type=int, default=30, help="%% of runs where the analyzer first blames the symptom")
    parser.add_argument("--false-fix-pct", type=int, default=10, help="%% of correct steps the analyzer 'fixes' anyway")
    parser.add_argument("--prior-signal-pct", type=int, default=70,
                        help="%% of runs whose agent confidence dips at the slip (else at another agent step)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from rootstep.gateway import Gateway, GatewayServer, Providers, Script, register_script

    everything = make_corpus(max(args.runs, args.throughput_runs), args.agent_steps, args.seed)
    corpus = everything[: args.runs]
    tasks = {t.task_id: t for t in everything}
    register_script("sim-agent", Script(fn=agent_script(tasks, args.prior_signal_pct), latency_s=args.agent_latency))
    register_script("sim-analyzer", Script(fn=analyzer_script(tasks, args.symptom_pct, args.false_fix_pct),
                                           latency_s=args.analyzer_latency))
    root = Path(tempfile.mkdtemp(prefix="rootstep-bench-annotation-"))
    gateway = Gateway(root / "journal", providers=Providers(max_concurrency=64, retries=0))
    server = GatewayServer(gateway).start()
    ledger = Ledger(server, tasks)
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            runs = {r.task_id: r for r in pool.map(ledger.record, everything)}
        record_s = time.perf_counter() - started
        failed = [r for r in runs.values() if not r.success]
        if len(failed) != len(everything):
            raise SystemExit("every simulated run should fail (its agent slips once)")
        n_steps = len(corpus[0].plan)
        print("SIMULATION: scripted agents and a scripted analyzer (no model); calls go through rootstep's gateway over HTTP")
        print(f"corpus: {len(corpus)} failed runs x {n_steps} steps ({args.agent_steps} agent steps), decisive step known; "
              f"agent latency {args.agent_latency * 1000:.0f} ms, analyzer latency {args.analyzer_latency * 1000:.0f} ms; "
              f"analyzer blames the symptom first in {args.symptom_pct}% of runs, 'fixes' {args.false_fix_pct}% of correct steps")
        print(f"recording {len(everything)} runs once (collect stage, 16 threads, not part of a label's cost): "
              f"{sum(len(r.steps) for r in runs.values())} steps, {record_s:.1f} s")

        naive = search_all(ledger, corpus, runs, "naive", 1)
        ours = {c: search_all(ledger, everything, runs, "rootstep", c) for c in (1, 4, 16)}
        base = ours[1].subset([t.task_id for t in corpus])
        base.seconds = sum(r["seconds"] for r in base.per_run.values())

        known = {t.task_id: t.slip for t in corpus}
        print()
        print(f"{'concurrency 1':<44}{'(a) naive scan, live':>22}{'(b) rootstep, prefix replay':>30}")
        rows = [
            *label_rows(naive, base, known),
            ("recorded calls served free per label", f"{naive.per_label(naive.total('replayed')):.1f}",
             f"{base.per_label(base.total('replayed')):.1f}"),
            ("replays per verified label", f"{naive.per_label(naive.total('replays')):.1f}",
             f"{base.per_label(base.total('replays')):.1f}"),
            ("wall time, whole corpus (s)", f"{naive.seconds:.1f}", f"{base.seconds:.1f}"),
            ("wall time per label (s)", f"{naive.per_label(naive.seconds):.2f}", f"{base.per_label(base.seconds):.2f}"),
        ]
        for name, a, b in rows:
            print(f"{name:<44}{a:>22}{b:>30}")
        same = all(naive.labels[k] == base.labels[k] for k in known) and all(
            ours[c].labels == ours[1].labels for c in ours)
        print()
        print(f"same labels from (a), (b) and (b) at every concurrency: {'yes' if same else 'NO'}")
        print(f"live LLM calls: (a) / (b) = {naive.live / max(base.live, 1):.1f}x fewer with rootstep "
              f"(agent calls alone: {naive.total('agent_live') / max(base.total('agent_live'), 1):.1f}x); target >= 5x")
        print(f"wall time: (a) / (b) = {naive.seconds / max(base.seconds, 1e-9):.1f}x")
        print()
        print(f"rootstep labels per minute on {len(everything)} runs (threads): " + "   ".join(
            f"concurrency {c}: {60 * t.verified / t.seconds:.0f}/min ({t.verified} labels, {t.seconds:.1f} s)"
            for c, t in ours.items()))
        print("(b) columns above are the first runs' share of the concurrency-1 pass; every label's cost is in its "
              "Annotation.cost (llm_calls = live agent calls + analyzer calls)")
        prior_section(ledger, gateway, corpus, runs, base, args)
    finally:
        server.stop()
        gateway.close()


if __name__ == "__main__":
    main()
