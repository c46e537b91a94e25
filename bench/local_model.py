"""The offline model on this machine: seconds per agent call and tokens/s with and without prefix reuse,
speculative decoding (plain vs n-gram vs draft model), the analyzer's call with and without the compact
rendering of the run, looping answers with and without the loop guard, and labels per hour on the main
job's slice.

    .venv/bin/python bench/local_model.py [--model local/qwen2.5-coder-0.5b] [--turns 8] [--warehouse ./rootstep-data]
    .venv/bin/python bench/local_model.py --sections speculative compact order loops labels

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

Speculative decoding, for the 0.5B and the 1.5B: the same requests to engines that differ only in decoding
(`plain`; `ngram`: llama.cpp's ngram-simple prompt lookup; `draft`: the 0.5B drafting for the 1.5B, after
checking that their vocabularies match), one slot and no prompt cache each, greedy: a step rewritten with a
correction (`rewrite_step.j2` on a real MBPP solution: the answer copies its prompt), an analyzer request
(`analyzer.j2`, JSON mode) and agent turns on GSM8K. Printed: generated tokens/s, the draft acceptance rate,
and how many answers are identical to plain decoding's.

Compact rendering: the analyzer's first prompt (`analyzer.j2`) for the failed runs of the warehouse (else a
synthetic AG2-style run whose coder and critic repeat one code block), rendered whole and compact
(`render_steps(compact=True)`), sent to one 1.5B engine without prompt cache with the same answer length:
prompt tokens and seconds per call side by side.

Prompt order: the analyzer's calls of an earlier-steps scan (one per agent step of the warehouse's failed runs,
a tested correction added after every second call), rendered with `analyzer_at_step.j2` as it is (what the
calls share first: the run, the corrections tested, how a fix is written; the step and the question last) and
as it was before 2026-11-29 (`bench/analyzer_at_step_before.j2`: the question right after the run), each on its
own 1.5B engine configured as the gateway's (prompt cache, 4 slots), calls alternating: prompt tokens processed
vs served from the cache, seconds per call.

The loop guard: a request known to loop, agent requests of the warehouse's gateway journal whose answers
looped to their token limit and some that ended by themselves, each sent to one 0.5B engine (one slot, no
prompt cache: greedy answers repeat) with the guard off, then on: seconds per call, tokens generated, how
many answers looped, how many were cut, and whether each guarded answer is a prefix of the unguarded one
(it must be: the guard only stops generation early).

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


# ---------------------------------------------------------------------------------- speculative decoding


def bare_engine(name: str, speculative: str) -> Any:
    """An engine of local model `name` with one slot, no prompt cache and `speculative` decoding."""
    from rootstep.gateway._local_model import Engine, engine_threads, gguf_path
    from rootstep.gateway._local_weights import local_model

    spec = local_model(name)
    return Engine(spec, gguf_path(name), n_ctx=16384, threads=engine_threads(), slots=1, prompt_cache=False,
                  speculative=speculative)


def speculative_requests(warehouse: str, n: int = 3) -> dict[str, list[dict[str, Any]]]:
    """The three workloads, `n` requests each: a rewritten step (copies its prompt), analyzer requests, agent
    turns."""
    from rootstep.benchmarks import load_tasks
    from rootstep.prompts import render
    from rootstep.model import Step

    rewrite = []
    for task in load_tasks("mbpp", limit=n, seed=3):
        code = task.metadata.get("reference_solution") or ""
        step = Step(index=1, agent="coder", content=f"```python\n{code}\n```")
        rewrite.append({"messages": [{"role": "user", "content": render(
            "rewrite_step.j2", question=task.prompt, step=step, instruction="Rename the function's first parameter "
            "to `data` everywhere it is used.", reason="", previous_answer=None, problem=None)}], "max_tokens": 160})
    analyzer = [{"messages": [{"role": "user", "content": p}], "max_tokens": 96,
                 "response_format": {"type": "json_object"}} for p in analyzer_prompts(warehouse, compact=True)[:n]]
    agent = [{"messages": [{"role": "system", "content": AGENTS["coder"]}, {"role": "user", "content": t.prompt}],
              "max_tokens": 160} for t in load_tasks("gsm8k", limit=n, seed=5)]
    return {"rewritten step": rewrite, "analyzer": analyzer, "agent turn": agent}


def speculative(warehouse: str, n: int = 3) -> None:
    from rootstep.gateway._local_model import DRAFT_MODEL, gguf_path, same_vocabulary

    workloads = speculative_requests(warehouse, n)
    print("\nspeculative decoding (one slot, no prompt cache, greedy; the same requests to each engine):")
    print(f"{'model':<22} {'decoding':<8} {'workload':<15} {'calls':>5} {'s/call':>7} {'gen tok/s':>10} "
          f"{'accepted':>9} {'same as plain':>14}")
    for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        modes = ["plain", "ngram"]
        draft = DRAFT_MODEL.get(name)
        if draft is not None:
            same = same_vocabulary(gguf_path(name), gguf_path(draft))
            print(f"  local/{draft} as the draft model of local/{name}: vocabularies "
                  f"{'match (tokens, merges, types)' if same else 'DIFFER: no draft model'}")
            if same:
                modes.append("draft")
        answers: dict[tuple[str, int], str] = {}
        for mode in modes:
            eng = bare_engine(name, "none" if mode == "plain" else mode)
            for workload, requests in workloads.items():
                rows = []
                for i, request in enumerate(requests):
                    started = time.perf_counter()
                    out = eng.chat({**request, "temperature": 0, "seed": 0})
                    timings = out.get("timings") or {}
                    text = out["choices"][0]["message"].get("content") or ""
                    rows.append({"seconds": time.perf_counter() - started, "generated": timings.get("predicted_n", 0),
                                 "gen_ms": timings.get("predicted_ms", 0.0), "draft": timings.get("draft_n") or 0,
                                 "accepted": timings.get("draft_n_accepted") or 0,
                                 "same": answers.setdefault((workload, i), text) == text})
                gen_ms = sum(r["gen_ms"] for r in rows)
                drafted = sum(r["draft"] for r in rows)
                accepted = f"{sum(r['accepted'] for r in rows) / drafted:.0%}" if drafted else "-"
                print(f"{name:<22} {mode:<8} {workload:<15} {len(rows):>5} "
                      f"{sum(r['seconds'] for r in rows) / len(rows):7.1f} "
                      f"{1000 * sum(r['generated'] for r in rows) / gen_ms if gen_ms else float('nan'):10.1f} "
                      f"{accepted:>9} "
                      f"{sum(r['same'] for r in rows):>6} of {len(rows):<5}")
            del eng


# ---------------------------------------------------------------------------------- looping answers

LOOPING_REQUEST = {"messages": [{"role": "user", "content": "Write a poem where every line is 'The sea is blue and the "
                                                          "sky is grey.' Write 40 lines."}], "max_tokens": None}
"""A request the 0.5B answers by repeating one line to its token limit (measured first, whatever the warehouse).
`max_tokens` None: the gateway's default, as for an agent request that sets none."""


def journal_requests(warehouse: str, model: str, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Agent requests to `model` from a warehouse's gateway journal (read by the gateway's own `Journal`): up to
    `n` whose answer looped to its token limit (cut by the guard or not), and `n` whose answer ended by itself."""
    from rootstep.model import loop_period
    from rootstep.gateway._recorder import Journal

    root = Path(warehouse, "gateway", "journal")
    journal = Journal(root) if root.is_dir() else None
    looped, ended = [], []
    for call in (c for run_id in (journal.run_ids() if journal else []) for c in journal.calls(run_id)):
        if call.model != model or call.mode != "live" or not call.response:
            continue
        choice = call.response["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        request = {"messages": call.request["messages"], "max_tokens": call.request.get("max_tokens")}
        if choice.get("finish_reason") == "length" and loop_period(text):
            looped.append(request)
        elif choice.get("finish_reason") == "stop" and len(ended) < n:
            ended.append(request)
    return looped[:n], ended


def loop_guard(warehouse: str, n: int = 3) -> None:
    """The same agent requests with the loop guard off and on, on one engine with one slot and no prompt cache
    (greedy answers then repeat exactly): the looping ones are cut early (the kept text is a prefix of the whole
    answer); the others come out identical (the guard streams)."""
    from rootstep.gateway._defaults import DEFAULT_MODEL
    from rootstep.gateway._local_model import StreamedAnswer, chat_body
    from rootstep.gateway._loops import LoopGuard
    from rootstep.model import loop_period

    looped, ended = journal_requests(warehouse, DEFAULT_MODEL, n)
    print(f"\nthe loop guard on {DEFAULT_MODEL}: a request known to loop, {len(looped)} calls of {warehouse}'s journal "
          f"that looped to their limit and {len(ended)} that ended by themselves; greedy, one engine (one slot, no "
          "prompt cache), each request with the guard off, then on:")
    print(f"{'requests':<9} {'guard':<6} {'calls':>5} {'s/call':>7} {'gen tokens':>11} {'looped':>7} {'cut':>4} "
          f"{'prefix of off':>14}")
    eng = bare_engine(DEFAULT_MODEL.split("/", 1)[1], "none")
    seconds: dict[tuple[str, str], float] = {}
    for kind, requests in (("looping", [LOOPING_REQUEST, *looped]), ("ending", ended)):
        whole: dict[int, str] = {}
        for guard in ("off", "on"):
            rows = []
            for i, request in enumerate(requests):
                body = chat_body(request["messages"], {"max_tokens": request["max_tokens"], "temperature": 0, "seed": 0})
                started = time.perf_counter()
                if guard == "off":
                    out = eng.chat(body)
                else:
                    answer = StreamedAnswer(LoopGuard())
                    eng.stream(body, answer.take)
                    out = answer.result()
                text = out["choices"][0]["message"].get("content") or ""
                rows.append((time.perf_counter() - started, out["usage"]["completion_tokens"],
                             out["choices"][0]["finish_reason"] == "length" and bool(loop_period(text)),
                             guard == "on" and out["choices"][0]["finish_reason"] == "length",
                             whole.setdefault(i, text).startswith(text)))
            seconds[(kind, guard)] = sum(r[0] for r in rows)
            print(f"{kind:<9} {guard:<6} {len(rows):>5} {seconds[(kind, guard)] / max(len(rows), 1):7.1f} "
                  f"{sum(r[1] for r in rows) / max(len(rows), 1):11.0f} {sum(r[2] for r in rows):>7} "
                  f"{sum(r[3] for r in rows):>4} {sum(r[4] for r in rows):>6} of {len(rows):<5}")
    del eng
    for kind in ("looping", "ending"):
        if seconds.get((kind, "on")):
            print(f"{kind} requests: {seconds[(kind, 'off')] / seconds[(kind, 'on')]:.2f}x faster with the guard")


# ---------------------------------------------------------------------------------- compact rendering


def _synthetic_failure() -> Any:
    """An AG2-style failed run (coder, executor, critic) whose coder and critic restate one code block."""
    from rootstep.benchmarks import load_tasks
    from rootstep.model import Step, Trajectory, Verdict

    task = load_tasks("gsm8k", limit=1, seed=11)[0]
    code = "```python\n" + "\n".join(f"step_{i} = {i} * 12  # part {i} of the computation" for i in range(12)) + \
        "\nprint(step_11)\n```"
    steps = [Step(index=0, agent="executor", kind="human", content=task.prompt)]
    for i in range(1, 9):
        agent = ("coder", "executor", "critic", "coder")[(i - 1) % 4]
        kind = "tool" if agent == "executor" else "agent"
        content = ("exitcode: 0 (execution succeeded)\nCode output: 132\n" + "debug line\n" * 60 if kind == "tool"
                   else f"Here is the program:\n{code}\nAnswer: 132")
        steps.append(Step(index=i, agent=agent, kind=kind, content=content))
    return Trajectory(framework="ag2", benchmark="gsm8k", task_id=task.id, question=task.prompt,
                      ground_truth=task.ground_truth, steps=steps, final_answer="132",
                      verdict=Verdict(success=False, score=0.0, details={"expected": task.ground_truth, "got": "132"}))


def failed_runs(warehouse: str, n: int) -> list[Any]:
    """Up to `n` failed runs the pipeline collected into `warehouse`, or the synthetic one when it has none."""
    if (Path(warehouse) / "catalog.duckdb").exists():
        from rootstep.warehouse import Warehouse

        wh = Warehouse(warehouse)
        ids = [r["id"] for r in wh.rows(f"SELECT id FROM failures WHERE source = 'rootstep' ORDER BY id LIMIT {int(n)}")]
        if ids:
            return [wh.trajectory(i) for i in ids]
    return [_synthetic_failure()]


def analyzer_prompts(warehouse: str, compact: bool) -> list[str]:
    """The analyzer's first prompt for each failed run of `warehouse` (a synthetic one when it has none)."""
    from rootstep.annotation._propose import verdict_feedback
    from rootstep.prompts import render, render_steps

    runs = failed_runs(warehouse, 6)
    return [render("analyzer.j2", question=t.question, ground_truth=t.ground_truth, feedback=verdict_feedback(t.verdict),
                   steps=render_steps(t, max_prompt_chars=24_000, compact=compact)[0], agents=t.agents, failed=[],
                   previous_answer=None, problem=None) for t in runs]


def compact_rendering(warehouse: str) -> None:
    from rootstep.gateway._defaults import DEFAULT_ANNOTATOR_MODEL

    name = DEFAULT_ANNOTATOR_MODEL.split("/", 1)[1]
    whole, compact = analyzer_prompts(warehouse, False), analyzer_prompts(warehouse, True)
    eng = bare_engine(name, "none")
    print(f"\nthe analyzer's first prompt, whole vs compact ({len(whole)} runs; {DEFAULT_ANNOTATOR_MODEL}, one slot, no "
          "prompt cache, 48 generated tokens each):")
    print(f"{'rendering':<10} {'chars':>7} {'prompt tok':>11} {'s/call':>7}")
    sums = {}
    for label, prompts in (("whole", whole), ("compact", compact)):
        rows = [call(eng, [{"role": "user", "content": p}], 48) for p in prompts]
        sums[label] = (sum(len(p) for p in prompts), sum(r["processed"] for r in rows), sum(r["seconds"] for r in rows))
        n = len(prompts)
        print(f"{label:<10} {sums[label][0] / n:7.0f} {sums[label][1] / n:11.0f} {sums[label][2] / n:7.1f}")
    print(f"compact: {sums['whole'][1] / max(sums['compact'][1], 1):.2f}x fewer prompt tokens, "
          f"{sums['whole'][2] / sums['compact'][2]:.2f}x faster per analyzer call")


# ---------------------------------------------------------------------------------- prompt order


def scan_prompts(warehouse: str, template: Any) -> list[list[str]]:
    """Per failed run (the warehouse's, else the synthetic one), the analyzer's prompts of an earlier-steps scan:
    one call per agent step in order, and after every second call a replayed correction joins the tested list
    (as in a search: the list only grows). `template`: a jinja template of `analyzer_at_step.j2`'s variables."""
    from rootstep.annotation._propose import verdict_feedback
    from rootstep.prompts import render_steps

    out = []
    for t in failed_runs(warehouse, 3):
        steps = render_steps(t, max_prompt_chars=24_000, compact=True)[0]
        failed: list[dict[str, Any]] = []
        prompts = []
        for n, step in enumerate(s for s in steps if s["kind"] == "agent"):
            prompts.append(template.render(question=t.question, ground_truth=t.ground_truth,
                                           feedback=verdict_feedback(t.verdict), steps=steps, agents=t.agents,
                                           failed=list(failed), step=step, require_fix=False, previous_answer=None,
                                           problem=None).strip() + "\n")
            if n % 2 == 1:
                failed.append({"step": step["index"], "agent": step["agent"], "fix": step["content"][:300],
                               "outcome": "the re-simulated run still failed"})
        out.append(prompts)
    return out


def prompt_order(warehouse: str) -> None:
    """The analyzer's calls of a scan with the prompt as it was (the question about the step before the tested
    corrections) and as it is (everything the calls share first), each order on its own engine configured as the
    gateway's (prompt cache on, 4 slots), the calls alternating between the two."""
    import jinja2

    from rootstep.gateway._defaults import DEFAULT_ANNOTATOR_MODEL
    from rootstep.gateway._local_model import Engine, engine_threads, gguf_path
    from rootstep.gateway._local_weights import local_model
    from rootstep.prompts import PROMPTS_DIR, environment

    bench_env = environment()
    bench_env.loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(Path(__file__).parent), jinja2.FileSystemLoader(PROMPTS_DIR)])
    orders = {"before": scan_prompts(warehouse, bench_env.get_template("analyzer_at_step_before.j2")),
              "now": scan_prompts(warehouse, environment().get_template("analyzer_at_step.j2"))}
    name = DEFAULT_ANNOTATOR_MODEL.split("/", 1)[1]
    spec = local_model(name)
    eng = {k: Engine(spec, gguf_path(name), n_ctx=16384, threads=engine_threads(), slots=4) for k in orders}
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in orders}
    for run in range(len(orders["now"])):
        for i in range(len(orders["now"][run])):
            for k in orders:
                rows[k].append(call(eng[k], [{"role": "user", "content": orders[k][run][i]}], 32))
    n = len(rows["now"])
    print(f"\nthe analyzer's calls of an earlier-steps scan ({n} calls over {len(orders['now'])} runs; "
          f"{DEFAULT_ANNOTATOR_MODEL}, prompt cache on, 32 generated tokens each):")
    print(f"{'order':<8} {'prompt tok':>11} {'processed':>10} {'reused':>8} {'s/call':>7}")
    sums = {k: summary(v) for k, v in rows.items()}
    for k, s in sums.items():
        total = s["processed"] + s["reused"]
        print(f"{k:<8} {total / n:11.0f} {s['processed'] / n:10.0f} {s['reused'] / n:8.0f} {s['s_per_call']:7.1f}")
    print(f"shared part first: {sums['before']['processed'] / max(sums['now']['processed'], 1):.2f}x fewer prompt tokens "
          f"processed, {sums['before']['s_per_call'] / sums['now']['s_per_call']:.2f}x faster per analyzer call")


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
    span = wh.rows("SELECT epoch(max(t)) - epoch(min(t)) AS s FROM (SELECT started_at AS t FROM runs "
                   "WHERE parent_run_id IS NULL AND source = 'rootstep' UNION ALL SELECT created_at AS t FROM annotations "
                   "WHERE method IN ('counterfactual', 'fault_injection'))")[0]["s"]
    if span and total_labels:
        print(f"  wall clock from the first collected run to the last annotation: {span / 60:.1f} min = "
              f"{3600 * total_labels / span:.1f} labels per wall-clock hour")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a local model (default: the agents' default)")
    parser.add_argument("--turns", type=int, default=8, help="agent turns of the run (then its replay)")
    parser.add_argument("--max-tokens", type=int, default=48, help="generated tokens per call (fixed: same work)")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 2, 4],
                        help="requests at once to compare (default 1 2 4; none to skip)")
    parser.add_argument("--warehouse", default=os.environ.get("ROOTSTEP_WAREHOUSE", "rootstep-data"))
    parser.add_argument("--requests", type=int, default=3, help="requests per workload of the speculative section")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS),
                        help="what to measure (default: everything)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if "reuse" in args.sections or "concurrency" in args.sections:
        prefix_reuse(args)
    if "speculative" in args.sections:
        speculative(args.warehouse, args.requests)
    if "compact" in args.sections:
        compact_rendering(args.warehouse)
    if "order" in args.sections:
        prompt_order(args.warehouse)
    if "loops" in args.sections:
        loop_guard(args.warehouse, args.requests)
    if "labels" in args.sections:
        labels_per_hour(args.warehouse)


def prefix_reuse(args: argparse.Namespace) -> None:
    from rootstep.gateway._defaults import DEFAULT_MODEL

    model = args.model or DEFAULT_MODEL
    name = model.split("/", 1)[1]
    started = time.perf_counter()
    reuse, plain = engines(name)
    print(f"{model}: two engines loaded in {time.perf_counter() - started:.1f} s; context {reuse.n_ctx} tokens; "
          f"threads {os.environ.get('ROOTSTEP_LOCAL_THREADS', 'every core')}; {os.cpu_count()} cores")
    if "reuse" in args.sections:
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
    if "concurrency" in args.sections and args.concurrency:
        concurrency(reuse, task_text(), args.max_tokens, sorted(set(args.concurrency)))


SECTIONS = {"reuse": "prefix (KV) reuse", "concurrency": "requests at once on one engine",
            "speculative": "plain vs n-gram vs draft-model decoding", "compact": "the analyzer's call, compact or whole",
            "order": "a scan's analyzer calls, shared part first or not",
            "loops": "looping agent answers with the loop guard on and off",
            "labels": "labels per hour from a warehouse"}


if __name__ == "__main__":
    main()
