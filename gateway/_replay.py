"""Replay: serve the recorded prefix, force the intervention, go live after it, and explain divergence.

Recorded calls are matched by `(agent, request_hash, counter)` within the replayed run, never by global
order, so agents that interleave differently still replay. The intervention names a *step*; the call
that produced that step's action is the *last* recorded call linked to the step (its `step_index`, or the
trajectory's `Step.call_ids`), preferring calls of purpose `step` over speaker selection or parse
retries. Tests (and callers that know the call) may address it by its position k in the recording.
A persistent intervention (`Intervention.persist`) also appends its instruction to the system prompt of
every later live call of the intervened agent (`ReplayPlan.provider_body`); the request hash, and so the
replay of the replayed run, stays that of what the framework sent.
"""

from __future__ import annotations

import copy
import difflib
import json
import threading
from typing import Any, Literal

from rootstep.model import Intervention, LLMCall

from ._chunks import openai_tool_call
from ._hashing import canonical_request

Key = tuple[str, str, int]
Decision = Literal["replayed", "forced", "live"]


class ReplayDivergence(Exception):
    """A request of the replayed prefix that the recording does not have; `diff` shows the nearest one."""

    def __init__(self, run_id: str, agent: str, request_hash: str, counter: int, diff: str, nearest: int | None):
        self.run_id = run_id
        self.agent = agent
        self.request_hash = request_hash
        self.counter = counter
        self.diff = diff
        self.nearest = nearest
        where = "no recorded request of this agent" if nearest is None else f"nearest recorded call #{nearest}"
        super().__init__(
            f"replay of run {run_id} diverged: agent {agent!r} sent a request (hash {request_hash}, "
            f"occurrence {counter}) that the recording does not have; {where}:\n{diff}"
        )


def intervention_position(
    recorded: list[LLMCall],
    intervention: Intervention,
    *,
    call_position: int | None = None,
    step_calls: dict[int, list[str]] | None = None,
) -> int:
    """The position in `recorded` of the call whose response the intervention replaces.

    `call_position` wins when given. Otherwise the step is mapped to calls through `step_calls`
    (step index -> call ids, from `Step.call_ids`) or the calls' own `step_index`; `intervention.agent`,
    when set, must agree. Raises ValueError naming the steps that do have calls.
    """
    if call_position is not None:
        if not 0 <= call_position < len(recorded):
            raise ValueError(f"intervention call {call_position} is outside the recording (0..{len(recorded) - 1})")
        return call_position
    ids = set((step_calls or {}).get(intervention.step, []))
    candidates = [
        i
        for i, c in enumerate(recorded)
        if (c.id in ids or c.step_index == intervention.step)
        and (intervention.agent is None or c.agent == intervention.agent)
        and c.error is None
    ]
    if not candidates:
        linked = sorted({c.step_index for c in recorded if c.step_index is not None} | set(step_calls or {}))
        raise ValueError(
            f"step {intervention.step} of run {intervention.run_id} has no recorded call"
            + (f" of agent {intervention.agent!r}" if intervention.agent else "")
            + f"; steps with calls: {linked or 'none (record with X-Rootstep-Step or pass step_calls)'}"
        )
    steps = [i for i in candidates if recorded[i].purpose == "step"]
    return (steps or candidates)[-1]


def forced_response(original: LLMCall, intervention: Intervention) -> dict[str, Any]:
    """The recorded response with the intervention's content: a full ChatCompletion.

    A `control` intervention forces the recorded response itself, unchanged (the step as the model
    wrote it, whatever the adapter made of its text). Tool calls: `intervention.tool_calls` when given (an empty list removes them), otherwise the
    original's are kept. The finish reason follows (`tool_calls` or `stop`); usage is zero, since no
    model produced it.
    """
    response: dict[str, Any] = copy.deepcopy(original.response) if original.response.get("choices") else {
        "object": "chat.completion",
        "created": int(original.created_at.timestamp()),
        "model": original.model,
        "choices": [{"index": 0, "message": {"role": "assistant"}}],
    }
    response["id"] = f"chatcmpl-forced-{original.request_hash[:12]}-{intervention.step}"
    response["system_fingerprint"] = "rootstep-forced"
    if intervention.kind == "control" and original.response.get("choices"):
        return response
    choice = response["choices"][0]
    message = choice.setdefault("message", {"role": "assistant"})
    message["role"] = "assistant"
    message["content"] = intervention.new_content
    if intervention.tool_calls is not None:
        calls = [openai_tool_call(t, f"call_forced_{intervention.step}_{i}") for i, t in enumerate(intervention.tool_calls)]
        message["tool_calls"] = calls or None
    choice["finish_reason"] = "tool_calls" if message.get("tool_calls") else "stop"
    response["choices"] = [choice]
    response["usage"] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return response


class ReplayPlan:
    """Which calls of a replay are served from the recording, which is forced, and when it goes live."""

    def __init__(
        self,
        run_id: str,
        recorded: list[LLMCall],
        intervention: Intervention | None = None,
        *,
        call_position: int | None = None,
        step_calls: dict[int, list[str]] | None = None,
    ):
        self.run_id = run_id
        self.recorded = recorded
        self.index: dict[Key, int] = {(c.agent, c.request_hash, c.counter): i for i, c in enumerate(recorded)}
        self.forced_key: Key | None = None
        self.forced: dict[str, Any] | None = None
        self.persist: tuple[str, str] | None = None
        """(agent, instruction) of a persistent intervention."""
        self.joint: dict[tuple[str, int], dict[str, Any]] = {}
        """A joint fix's later steps: (agent, the agent's call ordinal in the recording) -> forced response."""
        self.ordinals: dict[str, int] = {}
        if intervention is not None:
            position = intervention_position(recorded, intervention, call_position=call_position, step_calls=step_calls)
            original = recorded[position]
            self.forced_key = (original.agent, original.request_hash, original.counter)
            self.forced = forced_response(original, intervention)
            self.forced_position = position
            if intervention.persist:
                self.persist = (original.agent, intervention.persist)
            for extra in intervention.also:
                at = intervention_position(recorded, extra.model_copy(update={"run_id": intervention.run_id}),
                                           step_calls=step_calls)
                if at <= position:
                    raise ValueError(f"a joint fix's step {extra.step} must come after its first step {intervention.step}")
                agent = recorded[at].agent
                ordinal = sum(1 for c in recorded[:at] if c.agent == agent)
                self.joint[(agent, ordinal)] = forced_response(recorded[at], extra)
        self.live = False
        self._lock = threading.Lock()

    def decide(self, agent: str, request_hash: str, counter: int, request: dict[str, Any]) -> tuple[Decision, Any]:
        """`("replayed", LLMCall)`, `("forced", response)` or `("live", None)`; raises ReplayDivergence."""
        key = (agent, request_hash, counter)
        with self._lock:
            ordinal = self.ordinals.get(agent, 0)
            self.ordinals[agent] = ordinal + 1
            if self.live:
                joint = self.joint.pop((agent, ordinal), None)
                return ("forced", copy.deepcopy(joint)) if joint is not None else ("live", None)
            if key == self.forced_key:
                self.live = True
                return "forced", copy.deepcopy(self.forced)
        position = self.index.get(key)
        if position is None:
            raise self.divergence(agent, request_hash, counter, request)
        return "replayed", self.recorded[position]

    def provider_body(self, agent: str, body: dict[str, Any]) -> dict[str, Any]:
        """What a live call of `agent` sends the provider: `body`, or, after a persistent intervention was
        served, `body` with its instruction appended to the agent's system prompt (`with_instruction`)."""
        if self.persist is None or not self.live or agent != self.persist[0]:
            return body
        return with_instruction(body, self.persist[1])

    def divergence(self, agent: str, request_hash: str, counter: int, request: dict[str, Any]) -> ReplayDivergence:
        mine = [(i, c) for i, c in enumerate(self.recorded) if c.agent == agent]
        if not mine:
            agents = sorted({c.agent for c in self.recorded})
            return ReplayDivergence(self.run_id, agent, request_hash, counter, f"(recorded agents: {agents})", None)
        new_text = _pretty(canonical_request(request))
        same_hash = [(i, c) for i, c in mine if c.request_hash == request_hash]
        if same_hash:  # the request is known; this occurrence is one too many
            i, c = same_hash[-1]
            return ReplayDivergence(
                self.run_id, agent, request_hash, counter,
                f"the recording has this request {len(same_hash)} time(s) for this agent (last: call #{i}); "
                f"this is occurrence {counter + 1}",
                i,
            )
        best_i, best_ratio, best_text = None, -1.0, ""
        for i, c in mine:
            text = _pretty(canonical_request(c.request))
            ratio = difflib.SequenceMatcher(None, text, new_text, autojunk=False).quick_ratio()
            if ratio > best_ratio:
                best_i, best_ratio, best_text = i, ratio, text
        diff = difflib.unified_diff(
            best_text.splitlines(), new_text.splitlines(), f"recorded call #{best_i}", "replayed request", lineterm="", n=2
        )
        lines = list(diff)
        if len(lines) > 200:
            lines = lines[:200] + [f"... ({len(lines) - 200} more diff lines)"]
        return ReplayDivergence(self.run_id, agent, request_hash, counter, "\n".join(lines), best_i)


def with_instruction(body: dict[str, Any], instruction: str) -> dict[str, Any]:
    """A copy of a chat request whose first system message ends with `instruction` (a system message is
    put first when there is none; list contents get a text part)."""
    out = copy.deepcopy(body)
    messages = list(out.get("messages") or [])
    for message in messages:
        if message.get("role") in ("system", "developer"):
            content = message.get("content")
            if isinstance(content, list):
                message["content"] = [*content, {"type": "text", "text": "\n\n" + instruction}]
            else:
                message["content"] = f"{content or ''}\n\n{instruction}".lstrip("\n")
            break
    else:
        messages.insert(0, {"role": "system", "content": instruction})
    out["messages"] = messages
    return out


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)
