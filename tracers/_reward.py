"""The multi-granular reward of AgenTracer, for RL on failure attribution (verl, TRL).

    r = gate(format) * ( lambda * exp(-(t - t*)^2 / (2 sigma^2)) + (1 - lambda) * [agent == agent*] )

with lambda = 0.5 and sigma = 1 by default. The format gate is 1 only for a completion that is exactly
`<think>...</think><answer>AGENT | STEP</answer>` (whitespace around the parts allowed); anything else
scores 0. Agent names are compared exactly (after trimming), steps as integers.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

ANSWER_FORMAT = re.compile(r"^\s*<think>.*?</think>\s*<answer>\s*(.+?)\s*\|\s*(-?\d+)\s*</answer>\s*$", re.S)


def parse_answer(completion: str) -> tuple[str, int] | None:
    """(agent, step) from a well-formed completion, None when the format gate fails."""
    m = ANSWER_FORMAT.match(completion)
    return None if m is None else (m.group(1).strip(), int(m.group(2)))


def multi_granular_reward(completion: str, agent: str, step: int, lam: float = 0.5, sigma: float = 1.0) -> float:
    """The reward of one completion against the gold `agent` and `step` (0 when the format is wrong)."""
    parsed = parse_answer(completion)
    if parsed is None:
        return 0.0
    pred_agent, pred_step = parsed
    step_term = math.exp(-((pred_step - int(step)) ** 2) / (2 * sigma**2))
    return lam * step_term + (1 - lam) * float(pred_agent == agent.strip())


def _text(completion: Any) -> str:
    """TRL passes strings, or (conversational) lists of messages whose last one is the completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def trl_reward(completions: Sequence[Any], agent: Sequence[str], step: Sequence[int], **_: Any) -> list[float]:
    """A TRL `GRPOTrainer` reward function: dataset columns `agent` and `step` arrive as keyword lists."""
    return [multi_granular_reward(_text(c), a, s) for c, a, s in zip(completions, agent, step)]


def verl_compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None) -> float:
    """A verl `custom_reward_function`: `ground_truth` is `{"agent", "step"}` or the text `"agent | step"`."""
    if isinstance(ground_truth, dict):
        agent, step = ground_truth["agent"], int(ground_truth["step"])
    else:
        agent, _, step_text = str(ground_truth).rpartition("|")
        agent, step = agent.strip(), int(step_text)
    return multi_granular_reward(solution_str, agent, step)
