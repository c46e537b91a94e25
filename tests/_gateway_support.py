"""Shared pieces of the gateway tests: a running gateway and a tiny two-agent "framework".

The framework is deliberately stateful like real ones: each agent's request carries the conversation
so far (earlier answers included), so once an answer changes, every later request changes too.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from openai import OpenAI

from rootstep.gateway import Gateway, GatewayServer, Providers

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_python",
            "description": "Run Python code",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]


class Harness:
    """A gateway with its journal in `root`, served over HTTP on a free loopback port."""

    def __init__(self, root: Path, *, cache: bool = False):
        self.root = root
        self.gateway = Gateway(
            root / "journal",
            cache_dir=(root / "cache") if cache else None,
            providers=Providers(retries=2, backoff_s=0.01, max_backoff_s=0.02),
        )
        self.server = GatewayServer(self.gateway).start()

    def client(self, run_id: str, agent: str, timeout: float = 30, **headers: str) -> OpenAI:
        """`timeout`: seconds per call (a real local model on a busy machine needs minutes)."""
        return OpenAI(
            base_url=self.server.base_url(run_id, agent), api_key="not-a-real-key", max_retries=0, timeout=timeout,
            default_headers=headers or None,
        )

    def close(self) -> None:
        self.server.stop()
        self.gateway.close()


def run_framework(h: Harness, run_id: str, *, task: str = "Compute 6*7", rounds: int = 2, stamp: bool = False,
                  step_headers: bool = False) -> list[dict[str, Any]]:
    """Planner and coder take turns for `rounds` rounds; the coder's first turn calls a tool.

    Returns the assistant messages each agent received, in order. `stamp` puts a fresh uuid and the
    current time into the system prompt (as frameworks do), which replay must ignore.
    """
    system = "You are a team."
    if stamp:
        system += f" session={uuid.uuid4()} started={datetime.now(timezone.utc).isoformat()}"
    history: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    received: list[dict[str, Any]] = []
    step = 0
    for round_ in range(rounds):
        for agent in ("planner", "coder"):
            headers = {"X-Rootstep-Step": str(step)} if step_headers else {}
            client = h.client(run_id, agent, **headers)
            kwargs: dict[str, Any] = {"tools": TOOLS} if agent == "coder" else {}
            response = client.chat.completions.create(
                model="gpt-4o-mini", messages=history + [{"role": "user", "content": f"{agent}, your turn ({round_})"}],
                temperature=0, **kwargs,
            )
            message = response.choices[0].message
            received.append(message.model_dump(exclude_none=True))
            history.append({"role": "assistant", "name": agent, "content": message.content or ""})
            for call in message.tool_calls or []:
                history[-1].setdefault("tool_calls", []).append(call.model_dump())
                history.append({"role": "tool", "tool_call_id": call.id, "content": "42"})
            step += 1
    return received


def team_script(tag: str) -> Any:
    """A script for `scripted/<name>`: answers carry `tag` and a running number, so every live answer
    is unique and a replayed one is recognisable. The coder's turn 0 is a tool call."""
    count = {"n": 0}

    def answer(messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        count["n"] += 1
        last = messages[-1]["content"]
        if last.startswith("coder") and "(0)" in last:
            return {"content": None, "tool_calls": [{"name": "run_python", "arguments": {"code": "print(6*7)"}}]}
        agent = last.split(",")[0]
        return f"{tag}#{count['n']} {agent} says 42"

    return answer
