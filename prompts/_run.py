"""A run as prompt text: the one renderer the analyzer, the perturber and the tracers share.

`render_steps` turns steps of a run into the variables `_run.j2` prints (one block per step, 0-based, with
its tool calls and observation); every prompt that shows a run includes `_run.j2`, so a tool call or an
observation reads the same to the analyzer, the perturber, the attribution methods and a trained tracer.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rootstep.warehouse import Trajectory

MIN_STEP_CHARS = 40
"""The least a cut text keeps (a step's content or its observation), whatever the budget."""

MAX_TOOL_CALL_CHARS = 500
"""A tool call is shown as its JSON, cut to this many characters (it is not counted in the budget)."""


def step_cap(lengths: list[int], budget: int) -> int:
    """The largest cap c (at least `MIN_STEP_CHARS`) with sum(min(length, c)) <= budget."""
    remaining, left = budget, len(lengths)
    for length in sorted(lengths):
        if length * left > remaining:  # every text from here on is cut to the same cap
            return max(remaining // left, MIN_STEP_CHARS)
        remaining -= length
        left -= 1
    return max(max(lengths, default=0), MIN_STEP_CHARS)


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters in the middle (two thirds of them kept from the head), the cut said."""
    if len(text) <= limit:
        return text
    head = max(limit * 2 // 3, 1)
    tail = max(limit - head, 0)
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[len(text) - tail:] if tail else ''}"


def render_steps(trajectory: "Trajectory", first: int = 0, last: int | None = None,
                 max_prompt_chars: int = 60_000) -> tuple[list[dict[str, Any]], bool]:
    """Steps `first..last` (None: the last step) as `_run.j2`'s variables, and whether any text was cut.

    The texts are the steps' contents and observations; when they add up to more than `max_prompt_chars`,
    every one is cut to the same cap, the largest whose total fits (short texts stay whole and leave their
    share to the long ones), and a text keeps at least `MIN_STEP_CHARS` whatever the budget. Each step's
    tool calls are shown as sorted JSON (`MAX_TOOL_CALL_CHARS` each); `calls_tools` says the step acted
    through the model's own tool calls (OpenAI form), which a replacement must restate to change.
    """
    steps = trajectory.steps[first: (len(trajectory.steps) if last is None else last + 1)]
    texts = [s.content for s in steps] + [s.observation for s in steps if s.observation is not None]
    total = sum(len(text) for text in texts)
    cap = step_cap([len(text) for text in texts], max_prompt_chars) if total > max_prompt_chars else None

    def cut(text: str | None) -> str | None:
        return text if text is None or cap is None else shorten(text, cap)

    rendered = [
        {
            "index": s.index,
            "agent": s.agent,
            "kind": s.kind,
            "content": cut(s.content),
            "tool_calls": [json.dumps(t, sort_keys=True, default=str)[:MAX_TOOL_CALL_CHARS] for t in s.tool_calls],
            "calls_tools": any(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in s.tool_calls),
            "observation": cut(s.observation),
            "reads": s.metadata.get("reads"),
        }
        for s in steps
    ]
    return rendered, cap is not None and any(len(text) > cap for text in texts)
