"""Agent names as models and foreign tools write them, matched to the agents of a run."""

from __future__ import annotations

import re


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def match_agent(candidate: str, agents: list[str]) -> str | None:
    """The agent of `agents` that `candidate` names (exactly, then case- and punctuation-insensitively, then the
    longest agent name it starts with: "WebSurfer (the web agent)" is WebSurfer), or None."""
    candidate = candidate.strip().strip("\"'.,;()[]")
    if candidate in agents:
        return candidate
    by_norm = {_norm(a): a for a in agents}
    if _norm(candidate) in by_norm:
        return by_norm[_norm(candidate)]
    starts = [a for a in agents if _norm(candidate).startswith(_norm(a)) and _norm(a)]
    return max(starts, key=len) if starts else None
