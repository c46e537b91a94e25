"""Training data for failure tracers: SFT targets and GRPO prompts with the multi-granular reward.

Every labelled run becomes one example: the prompt shows the question, the run (and, with
`with_ground_truth`, the correct answer) and asks for `<think>...</think><answer>AGENT | STEP</answer>`.
SFT rows carry the target (the label's reason as the thought); GRPO rows carry the gold agent and step
for the reward (`rootstep.tracers.trl_reward` / `verl_compute_score`).

The train/test split is by TASK (benchmark + task id), never by run: two runs of the same task always
land on the same side, so a test score never rewards memorising a task.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from rootstep.prompts import render, render_steps
from rootstep.warehouse import Warehouse, write_jsonl, write_parquet


TrainingFormat = Literal["sft", "grpo"]


def task_split(benchmark: str, task_id: str, test_fraction: float, seed: int = 0) -> str:
    """'train' or 'test', decided by a hash of the task: stable across runs, machines and re-exports."""
    digest = hashlib.sha256(f"{seed}:{benchmark}:{task_id}".encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_fraction else "train"


def task_folds(tasks: list[tuple[str, str]], folds: int, seed: int = 0) -> list[int]:
    """A fold number (0..k-1) for each `(benchmark, task_id)`, k = min(folds, distinct tasks).

    Every run of a task lands in the same fold (cross-validation by task, never by run). Tasks are
    ordered by a hash of (seed, task) and dealt round-robin, so folds differ in size by at most one
    task and stay the same across machines and re-runs.
    """
    distinct = sorted(set(tasks), key=lambda t: hashlib.sha256(f"{seed}:{t[0]}:{t[1]}".encode()).hexdigest())
    k = max(1, min(folds, len(distinct)))
    fold_of = {task: position % k for position, task in enumerate(distinct)}
    return [fold_of[t] for t in tasks]


def target(agent: str, step: int, reason: str | None) -> str:
    return f"<think>{(reason or '').strip()}</think><answer>{agent} | {step}</answer>"


def export_training(
    warehouse: Warehouse,
    out: str | Path,
    format: TrainingFormat = "sft",
    with_ground_truth: bool = False,
    test_fraction: float = 0.2,
    seed: int = 0,
    max_prompt_chars: int = 60_000,
    where: str = "true",
) -> dict[str, int]:
    """Write `<out>/train.jsonl` and `<out>/test.jsonl` (GRPO: also `.parquet`, as verl reads); counts per split."""
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels = {r["run_id"]: r for r in warehouse.rows("SELECT run_id, agent, step, reason, method FROM labels")}
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for run_id, t in warehouse.trajectories(f"id IN (SELECT run_id FROM labels) AND ({where})"):
        label = labels[run_id]
        steps, truncated = render_steps(t, 0, len(t.steps) - 1, max_prompt_chars)
        prompt = render(
            "tracer_training.j2", question=t.question, ground_truth=t.ground_truth if with_ground_truth else None,
            agents=t.agents, steps=steps,
        )
        split = task_split(t.benchmark, t.task_id, test_fraction, seed)
        common = {
            "run_id": run_id, "framework": t.framework, "benchmark": t.benchmark, "task_id": t.task_id,
            "agent": label["agent"], "step": int(label["step"]), "label_method": label["method"], "truncated": truncated,
        }
        if format == "sft":
            rows[split].append(
                common | {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": target(label["agent"], label["step"], label["reason"])}]}
            )
        else:
            rows[split].append(
                common
                | {
                    "data_source": f"rootstep/{t.benchmark}",
                    "prompt": [{"role": "user", "content": prompt}],
                    "ability": "failure_attribution",
                    "reward_model": {"style": "rule", "ground_truth": {"agent": label["agent"], "step": int(label["step"])}},
                    "extra_info": {"run_id": run_id, "split": split},
                }
            )
    for split, split_rows in rows.items():
        write_jsonl(out / f"{split}.jsonl", split_rows)
        if format == "grpo":
            write_parquet(out / f"{split}.parquet", pa.Table.from_pylist(split_rows))
    return {split: len(split_rows) for split, split_rows in rows.items()}
