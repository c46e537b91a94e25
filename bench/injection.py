"""Fault injection on a self-correcting team: one-shot vs team-aware vs persistent, side by side.

    .venv/bin/python bench/injection.py [--frameworks ag2 smolagents] [--tasks 3] [--max-replays 4]

THIS IS A SIMULATION OF THE AGENTS, NOT OF THE FRAMEWORKS. AG2 and smolagents run for real in their
Docker images on real MBPP+ tasks (../shared/data), every LLM call through rootstep's gateway, Omega the
benchmark's own tests in the sandbox. The agents and perturbers are scripted (tests/_team_support.py) to
behave as real ones did through hand-model in issue 13: the coder checks its code on the visible example
and writes it again from scratch when a reviewer names a problem or asks for a re-check (unless a
standing instruction in its system prompt keeps a mistake); AG2's critic reads the executor's output and
asks once for the edge cases to be re-checked; smolagents' manager asks the coder once to double-check.
The one-shot perturber corrupts the coder's code the way the issue saw (visibly wrong); the team-aware
one proposes, at the step it is asked about, a mistake the visible example does not reach.

For each framework and mode, over the same collected successes: how many flipped (labels), the replays
and live LLM calls spent per label, and where the labels sit (the label's step as a share of the run:
0 first, 1 last). Modes: `one_shot` (perturber picks any step), `team_aware` (one-step corruption at
spread injection points), `persistent` (the same corruption, its instruction kept in the agent's system
prompt), `auto` (team-aware, then persistent at the same point: the pipeline's default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests._team_support: the simulated team

MODES = ("one_shot", "team_aware", "persistent", "auto")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frameworks", nargs="+", default=["ag2", "smolagents"])
    parser.add_argument("--tasks", type=int, default=3, help="MBPP+ tasks of the simulated team (1-3)")
    parser.add_argument("--max-replays", type=int, default=4, help="replays per injection (budget)")
    args = parser.parse_args()

    import tempfile

    from rootstep.annotation import Budget, inject_fault
    from rootstep.flows._session import open_session
    from rootstep.flows._searches import annotator_chat as _chat, search_replay as _replay_fn
    from tests import _team_support as T

    T.register_team()
    tasks = T.team_tasks(limit=args.tasks)
    budget = Budget(max_candidates=3, max_replays=args.max_replays, max_llm_calls=12)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rootstep-bench-injection-") as root, open_session(root) as session:
        for framework in args.frameworks:
            model, agent_models = T.TEAM_MODELS[framework]
            adapter = session.adapter(framework)
            started = time.perf_counter()
            successes = []
            for task in tasks:
                run = adapter.run(task, model, agent_models=agent_models)
                if not run.success:
                    raise SystemExit(f"the simulated team failed {task.task_id} on {framework}: {run.verdict}")
                successes.append(run)
            print(f"[{framework}] collected {len(successes)} successes in {time.perf_counter() - started:.0f} s", flush=True)
            for mode in MODES:
                flips, replays, live, positions, clock = 0, 0, 0, [], time.perf_counter()
                for run in successes:
                    perturber = _chat(session, T.PERTURBERS[mode], None, run, "perturber")
                    result = inject_fault(run, perturber, _replay_fn(session, run, []), budget, programmatic=False,
                                          mode=mode, answer_agents=adapter.answer_agents)
                    replays += len(result.replays)
                    live += result.cost.llm_calls  # the perturber's calls and the replays' live calls
                    if result.flipped:
                        flips += 1
                        positions.append(result.annotation.step / max(len(run.steps) - 1, 1))
                rows.append((framework, mode, flips, len(successes), replays, live, positions,
                             time.perf_counter() - clock))
                print(f"[{framework}] {mode}: {flips}/{len(successes)} flipped", flush=True)

    print()
    print("fault injection on a self-correcting team (simulated agents, real frameworks and tests)")
    head = f"{'framework':<11} {'mode':<11} {'flip rate':>10} {'replays/label':>14} {'LLM calls/label':>16} " \
           f"{'label position':>15} {'seconds':>8}"
    print(head)
    print("-" * len(head))
    for framework, mode, flips, n, replays, live, positions, seconds in rows:
        per = (lambda x: f"{x / flips:.1f}") if flips else (lambda x: "-")
        where = f"{statistics.mean(positions):.2f}" if positions else "-"
        print(f"{framework:<11} {mode:<11} {f'{flips}/{n} ({100 * flips / n:.0f}%)':>10} {per(replays):>14} "
              f"{per(live):>16} {where:>15} {seconds:>8.0f}")
    for framework in args.frameworks:
        mine = [r for r in rows if r[0] == framework]
        print(f"{framework} flip rate: " + ", ".join(f"{r[1]} {r[2]}/{r[3]}" for r in mine))


if __name__ == "__main__":
    main()
