"""Parsing attribution answers as models really write them; what cannot be parsed is never guessed.

Accepted forms (case-insensitive, markdown emphasis and backticks ignored):

* Who&When's `Agent Name: X` / `Step Number: N` / `Reason for Mistake: ...` lines, also with
  `**Agent Name:**`, `Agent: X`, `Step: step 12`, `Mistake Step: 12 (the 13th message)`;
* AgenTracer's `<answer>X | N</answer>`;
* a JSON object with `agent`/`mistake_agent` and `step`/`mistake_step`.

An agent name is matched against the trajectory's agents (exactly, then case- and punctuation-
insensitively); an answer naming no agent of the run, or a step outside it, is unparseable.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from rootstep.model import match_agent

_EMPHASIS = re.compile(r"[*`]{1,3}|(?<!\w)_{1,2}|_{1,2}(?!\w)")
_AGENT_LINE = re.compile(r"^\s*(?:mistake\s+|responsible\s+|faulty\s+)?agent(?:\s+name)?\s*[:=\-]\s*(.+?)\s*$", re.I | re.M)
_STEP_LINE = re.compile(
    r"^\s*(?:mistake\s+|decisive\s+)?step(?:\s+(?:number|index|no\.?))?\s*[:=\-]\s*(?:step\s*)?#?\s*(-?\d+)\b", re.I | re.M
)
# The reason is read from the raw answer (its text keeps `*` and `_`), markup around the label allowed.
_REASON_LINE = re.compile(
    r"^\s*[*_`]*\s*reason(?:\s+for\s+(?:the\s+)?mistake)?\s*[*_`]*\s*[:=\-]\s*[*_`]*\s*(.+)", re.I | re.M | re.S
)
_ANSWER_TAG = re.compile(r"<answer>\s*(.+?)\s*\|\s*(?:step\s*)?(-?\d+)\s*</answer>", re.I | re.S)
_YES_NO = re.compile(r"(?:decisive\s+error|answer)?\s*[:=\-]?\s*\b(yes|no)\b", re.I)
_HALF = re.compile(r"\b(lower|upper|first|second)\b(?:\s+half)?", re.I)


@dataclass
class ParsedAnswer:
    agent: str | None
    step: int | None
    reason: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _clean(text: str) -> str:
    return _EMPHASIS.sub("", text)


def parse_attribution(text: str, agents: list[str], n_steps: int) -> ParsedAnswer:
    """Agent, step and reason from an all-at-once style answer."""
    cleaned = _clean(text)
    agent_text = step_value = reason = None
    tag = _ANSWER_TAG.search(cleaned)
    if tag:
        agent_text, step_value = tag.group(1), int(tag.group(2))
    else:
        blob = re.search(r"\{.*\}", text, re.S)  # JSON keys keep their underscores
        if blob:
            try:
                data = json.loads(blob.group(0))
                agent_text = data.get("agent", data.get("mistake_agent"))
                raw_step = data.get("step", data.get("mistake_step"))
                step_value = int(str(raw_step).strip()) if raw_step is not None and re.fullmatch(r"\s*-?\d+\s*", str(raw_step)) else None
                reason = data.get("reason", data.get("mistake_reason"))
            except (json.JSONDecodeError, AttributeError):
                pass
        if agent_text is None:
            m = _AGENT_LINE.search(cleaned)
            agent_text = m.group(1) if m else None
        if step_value is None:
            m = _STEP_LINE.search(cleaned)
            step_value = int(m.group(1)) if m else None
    if reason is None:
        m = _REASON_LINE.search(text)
        reason = m.group(1).strip() if m else None
    if agent_text is None or step_value is None:
        missing = " and ".join(f"no {part}" for part, value in (("agent", agent_text), ("step", step_value)) if value is None)
        return ParsedAnswer(None, None, reason, error=f"unparseable: {missing} found in the answer")
    agent = match_agent(str(agent_text), agents)
    if agent is None:
        return ParsedAnswer(None, step_value, reason, error=f"unparseable: {str(agent_text)[:80]!r} is not an agent of the run")
    if not 0 <= step_value < n_steps:
        return ParsedAnswer(agent, None, reason, error=f"unparseable: step {step_value} is outside the run (0..{n_steps - 1})")
    return ParsedAnswer(agent, step_value, reason)


def parse_yes_no(text: str) -> bool | None:
    """True for yes, False for no, None when the answer says neither (or both first-equal)."""
    cleaned = _clean(text)
    m = re.search(r"decisive\s+error\s*[:=\-]\s*(yes|no)\b", cleaned, re.I) or _YES_NO.search(cleaned)
    return None if m is None else m.group(1).lower() == "yes"


def parse_half(text: str) -> str | None:
    """'lower' or 'upper' (also 'first'/'second' half), None when neither is named."""
    cleaned = _clean(text)
    m = re.search(r"half\s*[:=\-]\s*(lower|upper|first|second)\b", cleaned, re.I) or _HALF.search(cleaned)
    if m is None:
        return None
    word = m.group(1).lower()
    return "lower" if word in ("lower", "first") else "upper"
