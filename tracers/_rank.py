"""A ranking of a run's agent steps, most suspicious first: the prior of the counterfactual search.

`rank_steps(trajectory, "learned")` orders the agent steps by the learned scorer's probability,
`rank_steps(trajectory, "confidence")` by the confidence drop (or surprise). Pure given its inputs: the
same run, model and calls give the same order. Ties go to the earlier step. Pass the result as
`find_decisive_step(..., prior=ranking)`: the analyzer is asked about the steps in this order first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from rootstep.model import LLMCall, Trajectory
from rootstep.warehouse import Warehouse

from ._confidence import DEFAULT_SCORER, Criterion, confidence_scores, step_values
from ._learned import load_model
from ._methods import as_trajectory

PriorMethod = Literal["learned", "confidence"]


def rank_steps(
    trajectory: Trajectory | dict[str, Any],
    method: PriorMethod = "learned",
    *,
    warehouse: Warehouse | None = None,
    model: str | None = None,
    with_ground_truth: bool = True,
    calls: Sequence[LLMCall] | None = None,
    criterion: Criterion = "drop",
) -> list[int]:
    """The run's agent step indices, most suspicious first.

    learned: `model` is a model directory or id (default: the warehouse's newest for the setting).
    confidence: `calls` (or the warehouse's `llm_calls`) give recorded log-probabilities; `model` is the
    local scoring model used when they are missing (default `local/gemma-3-270m`).
    """
    t = as_trajectory(trajectory)
    if method == "learned":
        values = load_model(warehouse, model, with_ground_truth).scorer.scores(t)
    elif method == "confidence":
        values = step_values(confidence_scores(t, calls, warehouse, model or DEFAULT_SCORER), criterion)
    else:
        raise ValueError(f"method {method!r}: a prior is 'learned' or 'confidence'")
    return sorted(values, key=lambda i: (-values[i], i))
