"""A run as prompt text: the one renderer the analyzer, the perturber and the tracers share.

`render_steps` turns steps of a run into the variables `_run.j2` prints (one block per step, 0-based, with
its tool calls and observation); every prompt that shows a run includes `_run.j2`, so a tool call or an
observation reads the same to the analyzer, the perturber, the attribution methods and a trained tracer.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Sequence

from rootstep.model import collapse_loop

if TYPE_CHECKING:  # pragma: no cover
    from rootstep.model import Trajectory

MIN_STEP_CHARS = 40
"""The least a cut text keeps (a step's content or its observation), whatever the budget."""

MAX_TOOL_CALL_CHARS = 500
"""A tool call is shown as its JSON, cut to this many characters (it is not counted in the budget)."""


MAX_OUTPUT_CHARS = 1500
"""In the compact rendering, a tool's or the environment's output (a non-agent step's content, a step's
observation) is cut to this many characters, the cut marked (`shorten`): a long traceback or test log says
what it says in its head and its tail."""

MIN_REPEAT_CHARS = 80
"""A message or code block shorter than this is shown again rather than replaced by a reference (the
reference would be about as long)."""

_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.S)


def _key(text: str) -> str:
    return " ".join(text.split())


def compact_contents(steps: Sequence[Any], task: str | None = None) -> list[str]:
    """The steps' contents as the compact rendering shows them: a message that repeats an earlier step's
    (whitespace aside) becomes `[the same message as step k]`, a fenced code block that repeats one of an
    earlier step becomes a fenced `[the same code as in step k]` (AG2 coders and critics restate the same
    block turn after turn), a step that repeats the task becomes `[the task, as given above]`, a message
    that ends by repeating one block until its token limit shows the block once and says how often it came
    back (`collapse_loop`: the 0.5B's loops fill a 1,024-token step, and the 1.5B asked about such a step
    copies the loop into its own answer), and a non-agent step's output is cut to `MAX_OUTPUT_CHARS`. Step
    numbers are kept, so a reference reads as the run reads; a first occurrence is always shown whole."""
    messages: dict[str, int] = {}
    blocks: dict[str, int] = {}
    task_key = _key(task or "")
    out = []
    for step in steps:
        text = step.content or ""
        key = _key(text)
        if task_key and key == task_key and len(key) >= MIN_REPEAT_CHARS:
            out.append("[the task, as given above]")
            continue
        if len(key) >= MIN_REPEAT_CHARS and key in messages:
            out.append(f"[the same message as step {messages[key]}]")
            continue
        if len(key) >= MIN_REPEAT_CHARS:
            messages.setdefault(key, step.index)
        text = collapse_loop(text)

        def block(match: re.Match[str], index: int = step.index) -> str:
            body = _key(match.group(1))
            if len(body) < MIN_REPEAT_CHARS:
                return match.group(0)
            first = blocks.setdefault(body, index)
            return match.group(0) if first == index else f"```\n[the same code as in step {first}]\n```"

        text = _FENCED.sub(block, text)
        if getattr(step, "kind", "agent") != "agent":
            text = shorten(text, MAX_OUTPUT_CHARS)
        out.append(text)
    return out


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
                 max_prompt_chars: int = 60_000, *, compact: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """Steps `first..last` (None: the last step) as `_run.j2`'s variables, and whether any text was cut.

    `compact` (the analyzer's and the perturber's view): repeated messages and code blocks are shown as
    references to the step that first had them, a closing loop once, and tool and environment outputs are
    capped (`compact_contents`, `MAX_OUTPUT_CHARS`); each step keeps its whole text as `full` (its loop
    collapsed all the same) for the prompt that asks about that step. The texts are the steps' contents and observations; when they add up to more than `max_prompt_chars`,
    every one is cut to the same cap, the largest whose total fits (short texts stay whole and leave their
    share to the long ones), and a text keeps at least `MIN_STEP_CHARS` whatever the budget. Each step's
    tool calls are shown as sorted JSON (`MAX_TOOL_CALL_CHARS` each); `calls_tools` says the step's agent acts
    through the model's own tool calls (OpenAI form) somewhere in the run: a replacement restates them to change
    them, and may add calls to a step that answered in text where it should have called (BFCL: a caller that said
    "Removed NVDA" without calling).
    """
    tool_agents = {s.agent for s in trajectory.steps
                   if any(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in s.tool_calls)}
    steps = trajectory.steps[first: (len(trajectory.steps) if last is None else last + 1)]
    if compact:
        contents = compact_contents(steps, trajectory.question)
        observations = [None if s.observation is None else shorten(s.observation, MAX_OUTPUT_CHARS) for s in steps]
    else:
        contents = [s.content for s in steps]
        observations = [s.observation for s in steps]
    texts = contents + [o for o in observations if o is not None]
    total = sum(len(text) for text in texts)
    cap = step_cap([len(text) for text in texts], max_prompt_chars) if total > max_prompt_chars else None

    def cut(text: str | None) -> str | None:
        return text if text is None or cap is None else shorten(text, cap)

    rendered = [
        {
            "index": s.index,
            "agent": s.agent,
            "kind": s.kind,
            "content": cut(content),
            "tool_calls": [json.dumps(t, sort_keys=True, default=str)[:MAX_TOOL_CALL_CHARS] for t in s.tool_calls],
            "calls_tools": s.kind == "agent" and s.agent in tool_agents,
            "observation": cut(observation),
            "reads": s.metadata.get("reads"),
            **({"full": collapse_loop(s.content)} if compact else {}),
        }
        for s, content, observation in zip(steps, contents, observations)
    ]
    return rendered, cap is not None and any(len(text) > cap for text in texts)
