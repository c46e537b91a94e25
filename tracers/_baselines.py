"""The trivial baselines a tracer must beat, on the same task-grouped folds, and the published figures.

Measured on the shared Who&When Algorithm-Generated subset, always answering "step 1" is right 27.0% of
the time (exact step equality): more than GPT-4o with any of the paper's three methods. So every
evaluation prints, beside a method's own accuracy and computed on the same runs and the same folds:

* random: an agent and a step drawn uniformly from the run (expected accuracy, `_scoring.random_baseline`);
* constant step: the step most often decisive in the OTHER folds (ties: the earlier step; a run shorter
  than it gets its last step), and the agent acting at that step of the run;
* most frequent agent: of the run's agents, the one most often blamed in the other folds (ties: the one
  that acts first); a run none of whose agents was ever blamed gets its most active agent (most agent
  steps, ties: the first to act).

With one fold (a single task) there are no "other folds" and the baselines are fitted on the runs
themselves (optimistic, and noted as such by the caller).
"""

from __future__ import annotations

import csv
import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from rootstep.model import Trajectory

from ._scoring import Scored

WHOWHEN_SOURCE = (
    "Who&When (Zhang, Yin et al., ICML 2025, arXiv:2505.00212), Table 1: GPT-4o, their scorer "
    "(a gold step that is a substring of the predicted one counts, so '1' matches '10')"
)
PUBLISHED_FILE = Path(__file__).with_name("whowhen_published.csv")


def _published() -> dict[str, list[tuple[str, bool, float, float]]]:
    out: dict[str, list[tuple[str, bool, float, float]]] = {}
    with open(PUBLISHED_FILE, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out.setdefault(row["benchmark"], []).append(
                (row["method"], row["with_ground_truth"] == "true", float(row["agent_pct"]), float(row["step_pct"])))
    return out


PUBLISHED = _published()
"""Published GPT-4o figures of the Who&When paper (percent), from `whowhen_published.csv`: benchmark ->
(method, with ground truth, agent-level %, step-level %). Their Hand-Crafted figures are on all 58
runs; the shared data holds 12 of them."""


def best_constant_step(gold_steps: Sequence[int]) -> int:
    """The step most often decisive (ties: the earlier one); 0 for no data."""
    counts = Counter(gold_steps)
    return min(counts, key=lambda s: (-counts[s], s)) if counts else 0


def most_active_agent(trajectory: Trajectory) -> str | None:
    acting = [s.agent for s in trajectory.steps if s.kind == "agent"] or [s.agent for s in trajectory.steps]
    counts = Counter(acting)
    return max(dict.fromkeys(acting), key=lambda a: counts[a]) if acting else None


def majority_agent(trajectory: Trajectory, blamed: Counter[str]) -> str | None:
    """The run's agent most often blamed in `blamed` (ties: first to act), else its most active agent."""
    candidates = [a for a in trajectory.agents if blamed[a] > 0]
    if candidates:
        return max(candidates, key=lambda a: blamed[a])  # max keeps the first of equals: first to act
    return most_active_agent(trajectory)


def attach_baselines(items: Sequence[Scored], trajectories: Mapping[str, Trajectory], folds: Sequence[int]) -> list[Scored]:
    """`items` with `const_step`, `const_agent` and `majority_agent` filled, each fitted on the other folds."""
    if len(items) != len(folds):
        raise ValueError(f"{len(items)} runs but {len(folds)} fold numbers")
    out: list[Scored] = []
    single = len(set(folds)) <= 1
    for item, fold in zip(items, folds):
        train = [i for i, f in zip(items, folds) if single or f != fold]
        const = best_constant_step([i.gold_step for i in train])
        t = trajectories[item.run_id]
        step = min(const, len(t.steps) - 1)
        out.append(dataclasses.replace(
            item, const_step=step, const_agent=t.steps[step].agent,
            majority_agent=majority_agent(t, Counter(i.gold_agent for i in train)),
        ))
    return out


def published_rows(benchmark: str) -> list[dict[str, object]]:
    """The published figures for `benchmark` as table rows (empty when none are known)."""
    return [
        {"method": method, "ground_truth": "with" if gt else "without", "agent_acc": agent, "step_acc": step}
        for method, gt, agent, step in PUBLISHED.get(benchmark, [])
    ]
