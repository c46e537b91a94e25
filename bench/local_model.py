"""The offline model on this machine: seconds per agent call and tokens/s with and without prefix reuse,
and labels per hour on the main job's slice.

    .venv/bin/python bench/local_model.py [--model local/qwen2.5-coder-0.5b] [--turns 8] [--warehouse ./rootstep-data]

Measured side by side in one run, in one process, on two engines of the same model that differ only in
prompt (KV) caching:
  * reuse:    the gateway's engine as configured (prompt cache on, unified KV cache over several slots,
              llama.cpp's host-memory prompt cache);
  * no reuse: `cache_prompt` off and no host prompt cache: every request's prompt is processed whole.
The workload is what a multi-agent run sends: three agents (coder, critic, executor-style feedback)
take turns on a real GSM8K task, each request carrying its agent's system prompt and the whole
conversation so far (it grows by appending), greedy decoding with a fixed answer length so both engines
generate the same tokens; then the run's requests are sent again, as a replay re-sends its recorded
prefix. Each request goes to both engines back to back (the machine is shared: alternating keeps the
load the same for both). Printed: seconds per call, prompt tokens processed vs reused, prompt and
generated tokens/s, and the ratio.

Labels per hour: from a warehouse the main job wrote (`scripts/main.sh`), verified counterfactual and
fault-injection labels divided by the wall time spent on them (the collected runs' episode seconds plus
the annotation searches' seconds), per method.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

AGENTS = {
    "coder": "You are the coder of a team solving a math problem. Write Python that prints the answer, then a line "
             "'Answer: <number>'.",
    "critic": "You are the critic of a team solving a math problem. Check the coder's reasoning and its printed "
              "result; say what is wrong or approve it.",
    "planner": "You are the planner of a team solving a math problem. Break the problem into steps for the coder.",
}


def task_text() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rootstep.benchmarks import load_tasks

    return load_tasks("gsm8k", limit=1, seed=0)[0].prompt


def engines(name: str) -> tuple[Any, Any]:
    from rootstep.gateway._local_model import Engine, engine, engine_threads, gguf_path

    reuse = engine(name)  # exactly what the gateway uses
    plain = Engine(reuse.spec, gguf_path(name), n_ctx=reuse.n_ctx, threads=engine_threads(), slots=1,
                   prompt_cache=False)
    return reuse, plain


def call(engine: Any, messages: list[dict[str, str]], max_tokens: int) -> dict[str, float]:
    started = time.perf_counter()
    result = engine.chat({"messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 0,
                          "ignore_eos": True})
    seconds = time.perf_counter() - started
    timings = result.get("timings") or {}
    return {"seconds": seconds, "processed": timings.get("prompt_n", 0), "reused": timings.get("cache_n", 0),
            "prompt_ms": timings.get("prompt_ms", 0.0), "generated": timings.get("predicted_n", 0),
            "gen_ms": timings.get("predicted_ms", 0.0),
            "text": (result["choices"][0]["message"].get("content") or "")}


def workload(question: str, turns: int, max_tokens: int, reuse: Any, plain: Any) -> dict[str, list[dict[str, float]]]:
    order = ["planner", "coder", "critic"]
    history: list[dict[str, str]] = [{"role": "user", "content": question}]
    requests: list[list[dict[str, str]]] = []
    out: dict[str, list[dict[str, float]]] = {"reuse": [], "no reuse": []}
    for turn in range(turns):
        agent = order[turn % len(order)]
        messages = [{"role": "system", "content": AGENTS[agent]}, *history]
        requests.append(messages)
        a, b = call(reuse, messages, max_tokens), call(plain, messages, max_tokens)
        out["reuse"].append(a)
        out["no reuse"].append(b)
        history.append({"role": "user", "content": f"{agent}: {a['text']}"})
    for messages in requests:  # the replay re-sends the recorded prefix
        out["reuse"].append(call(reuse, messages, max_tokens))
        out["no reuse"].append(call(plain, messages, max_tokens))
    return out


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    prompt_ms = sum(r["prompt_ms"] for r in rows)
    gen_ms = sum(r["gen_ms"] for r in rows)
    return {
        "calls": len(rows),
        "s_per_call": sum(r["seconds"] for r in rows) / len(rows),
        "p50_s": median(r["seconds"] for r in rows),
        "processed": sum(r["processed"] for r in rows),
        "reused": sum(r["reused"] for r in rows),
        "prompt_tok_s": 1000 * sum(r["processed"] for r in rows) / prompt_ms if prompt_ms else float("nan"),
        "gen_tok_s": 1000 * sum(r["generated"] for r in rows) / gen_ms if gen_ms else float("nan"),
    }


def concurrency(engine: Any, question: str, max_tokens: int, levels: list[int]) -> None:
    """Episodes running at once share the engine's slots (one batch per decoding step): the same total work
    (`max(levels)` requests of different agents) sent at each level of concurrency, side by side."""
    from concurrent.futures import ThreadPoolExecutor

    n = max(levels)
    requests = [[{"role": "system", "content": AGENTS[agent]}, {"role": "user", "content": f"{question}\n(attempt {i})"}]
                for i, agent in zip(range(n), [*AGENTS] * n)]
    print(f"\n{n} requests ({max_tokens} generated tokens each) at 1..{n} at once, on the gateway's engine "
          f"({engine.slots} slots):")
    print(f"{'at once':>8} {'wall s':>8} {'gen tok/s (all)':>16} {'s per request':>14}")
    base = None
    for level in levels:
        started = time.perf_counter()
        with ThreadPoolExecutor(level) as pool:
            rows = list(pool.map(lambda m: call(engine, m, max_tokens), requests))
        wall = time.perf_counter() - started
        tok_s = sum(r["generated"] for r in rows) / wall
        base = base or tok_s
        print(f"{level:>8} {wall:8.1f} {tok_s:16.1f} {wall / n:14.2f}   ({tok_s / base:.2f}x the throughput at 1)")


def labels_per_hour(location: str) -> None:
    from rootstep.warehouse import Warehouse

    if not (Path(location) / "catalog.duckdb").exists() and "://" not in location:
        print(f"labels per hour: no warehouse at {location}; run `bash scripts/main.sh` first (or pass --warehouse)")
        return
    wh = Warehouse(location)
    episode_s = wh.rows("SELECT coalesce(sum(duration_s), 0) AS s, count(*) AS n FROM runs "
                        "WHERE parent_run_id IS NULL AND source = 'rootstep'")[0]
    rows = wh.rows("SELECT method, count(*) FILTER (verified) AS labels, count(*) AS searches, "
                   "coalesce(sum(cost_seconds), 0) AS s FROM annotations "
                   "WHERE method IN ('counterfactual', 'fault_injection') GROUP BY method ORDER BY method")
    total_s = episode_s["s"] + sum(r["s"] for r in rows)
    total_labels = sum(r["labels"] for r in rows)
    print(f"\nlabels per hour on the slice in {location}: {episode_s['n']} collected runs ({episode_s['s'] / 60:.1f} min "
          f"of episodes)")
    for r in rows:
        print(f"  {r['method']:<16} {r['labels']:>3} verified of {r['searches']:>3} searches in {r['s'] / 60:5.1f} min")
    if total_s:
        print(f"  all: {total_labels} labels in {total_s / 60:.1f} min of episodes and searches = "
              f"{3600 * total_labels / total_s:.1f} labels/hour ({total_s / max(total_labels, 1):.0f} s per label)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a local model (default: the agents' default)")
    parser.add_argument("--turns", type=int, default=8, help="agent turns of the run (then its replay)")
    parser.add_argument("--max-tokens", type=int, default=48, help="generated tokens per call (fixed: same work)")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 2, 4],
                        help="requests at once to compare (default 1 2 4; none to skip)")
    parser.add_argument("--warehouse", default=os.environ.get("ROOTSTEP_WAREHOUSE", "rootstep-data"))
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rootstep.gateway._defaults import DEFAULT_MODEL

    model = args.model or DEFAULT_MODEL
    name = model.split("/", 1)[1]
    started = time.perf_counter()
    reuse, plain = engines(name)
    print(f"{model}: two engines loaded in {time.perf_counter() - started:.1f} s; context {reuse.n_ctx} tokens; "
          f"threads {os.environ.get('ROOTSTEP_LOCAL_THREADS', 'every core')}; {os.cpu_count()} cores")
    out = workload(task_text(), args.turns, args.max_tokens, reuse, plain)
    print(f"\n{args.turns} agent turns on GSM8K test-0, then their replay ({2 * args.turns} calls per engine, "
          f"{args.max_tokens} generated tokens each):")
    print(f"{'engine':<10} {'s/call':>8} {'p50 s':>7} {'prompt tok processed':>21} {'reused':>8} "
          f"{'prompt tok/s':>13} {'gen tok/s':>10}")
    sums = {k: summary(v) for k, v in out.items()}
    for k, s in sums.items():
        print(f"{k:<10} {s['s_per_call']:8.2f} {s['p50_s']:7.2f} {s['processed']:21.0f} {s['reused']:8.0f} "
              f"{s['prompt_tok_s']:13.1f} {s['gen_tok_s']:10.1f}")
    a, b = sums["reuse"], sums["no reuse"]
    print(f"prefix reuse: {b['s_per_call'] / a['s_per_call']:.2f}x faster per call; "
          f"{b['processed'] / max(a['processed'], 1):.1f}x fewer prompt tokens processed")
    replay_a = summary(out["reuse"][args.turns:])
    replay_b = summary(out["no reuse"][args.turns:])
    print(f"the replay's calls alone: {replay_b['s_per_call'] / replay_a['s_per_call']:.2f}x faster with reuse "
          f"({replay_a['s_per_call']:.2f} vs {replay_b['s_per_call']:.2f} s per call)")
    if args.concurrency:
        concurrency(reuse, task_text(), args.max_tokens, sorted(set(args.concurrency)))
    labels_per_hour(args.warehouse)


if __name__ == "__main__":
    main()
