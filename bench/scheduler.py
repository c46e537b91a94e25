"""How many searches at once fit this machine on the offline models: 1, 2 and 4 at once, side by side.

    .venv/bin/python bench/scheduler.py [--searches 4] [--rounds 3] [--levels 1 2 4]

A search on the offline models alternates between the analyzer (the 1.5B: a long prompt whose prefix, the
run, is the same in every call of the search, and a short answer) and replays of the team (the 0.5B: a few
agent calls that continue a transcript). This script runs `--searches` such searches, each `--rounds` rounds
of one analyzer call and one replay of three agent calls, through the real engines the gateway uses, with the
scheduler's search slots (`rootstep.flows._scheduler.Slots`) admitting 1, 2 or 4 at once. Printed per level:
the wall time of the whole queue (throughput), the mean seconds a search takes from its admission (what its
outer wall clock sees) and from its submission, and the ratios against one at a time.

`CORES_PER_LOCAL_SEARCH` in `rootstep.flows._scheduler` is chosen from this table: the level that finishes
the queue soonest without making each search's own time grow past what the queue gains.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

AGENT_PROMPT = ("You are the coder of a team solving a math problem. Write Python that prints the answer, then a line "
                "'Answer: <number>'.")


def tasks(n: int) -> list[str]:
    from rootstep.benchmarks import load_tasks

    return [t.prompt for t in load_tasks("gsm8k", limit=n, seed=7)]


def analyzer_prompt(question: str, search: int, round_: int) -> str:
    run = "\n".join(f"[step {i}] {'coder' if i % 2 else 'critic'}:\nLet me compute step {i} of the problem: "
                    f"{question[: 200]} ... value_{i} = {i * 7 + search}" for i in range(1, 12))
    return (f"You are the analyzer of a counterfactual replay system. The run below FAILED.\n\nTASK:\n{question}\n\n"
            f"THE RUN:\n{run}\n\nExamine step {round_ + 1}. Reply with one JSON object: "
            '{"fix_needed": false, "reason": "..."} or {"fix_needed": true, "reason": "...", "suggested_fix": "..."}')


def one_search(engines: dict[str, Any], question: str, search: int, rounds: int) -> None:
    history: list[dict[str, str]] = [{"role": "user", "content": question}]
    for r in range(rounds):
        engines["analyzer"].chat({"messages": [{"role": "user", "content": analyzer_prompt(question, search, r)}],
                                  "max_tokens": 48, "temperature": 0, "ignore_eos": True,
                                  "response_format": {"type": "json_object"}})
        for _ in range(3):  # a replay: three live agent calls continuing the transcript
            out = engines["agents"].chat({"messages": [{"role": "system", "content": AGENT_PROMPT}, *history],
                                          "max_tokens": 48, "temperature": 0, "ignore_eos": True})
            history.append({"role": "assistant", "content": out["choices"][0]["message"].get("content") or ""})
            history.append({"role": "user", "content": "Check it again."})


def run_level(engines: dict[str, Any], questions: list[str], rounds: int, level: int) -> dict[str, float]:
    from rootstep.flows._scheduler import Slots

    slots = Slots(level)
    admitted: dict[int, float] = {}
    finished: dict[int, float] = {}
    submitted = time.perf_counter()

    def search(i: int) -> None:
        with slots.held():
            admitted[i] = time.perf_counter()
            one_search(engines, questions[i], i, rounds)
            finished[i] = time.perf_counter()

    threads = [threading.Thread(target=search, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
        time.sleep(0.05)  # submission order = admission order
    for t in threads:
        t.join()
    return {"wall": max(finished.values()) - submitted,
            "from_admission": mean(finished[i] - admitted[i] for i in finished),
            "from_submission": mean(finished[i] - submitted for i in finished)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--searches", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    from rootstep.gateway._defaults import DEFAULT_ANNOTATOR_MODEL, DEFAULT_MODEL
    from rootstep.gateway._local_model import engine

    engines = {"analyzer": engine(DEFAULT_ANNOTATOR_MODEL.split("/", 1)[1]), "agents": engine(DEFAULT_MODEL.split("/", 1)[1])}
    questions = tasks(args.searches)
    one_search(engines, questions[0], 99, 1)  # warm both engines
    print(f"{args.searches} searches of {args.rounds} rounds (an analyzer call on {DEFAULT_ANNOTATOR_MODEL}, then a "
          f"replay of 3 calls on {DEFAULT_MODEL}); {os.cpu_count()} cores, threads "
          f"{os.environ.get('ROOTSTEP_LOCAL_THREADS', 'every core')}")
    print(f"{'at once':>8} {'queue s':>9} {'search s (from admission)':>26} {'search s (from submission)':>27}")
    base = None
    for level in args.levels:
        r = run_level(engines, questions, args.rounds, level)
        base = base or r
        print(f"{level:>8} {r['wall']:9.1f} {r['from_admission']:26.1f} {r['from_submission']:27.1f}   "
              f"queue {base['wall'] / r['wall']:.2f}x as fast as one at a time; each search "
              f"{r['from_admission'] / base['from_admission']:.2f}x as long from admission")


if __name__ == "__main__":
    main()
