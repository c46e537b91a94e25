"""What every trace importer shares: a step as read from a source, and its assembly into a `Trajectory`.

An importer reads its format into `SourceStep`s (agent, kind, text, tool calls, the source's own id for
the step) and calls `build_trajectory`, which numbers the steps, keeps the source ids in
`Step.metadata["source_id"]` and the trace's ids in `Trajectory.metadata["trace"]` (what a verdict needs
to go back where it came from), and marks a trace whose steps carry no text and no call arguments at all as
`metadata["content_captured"] = False`: the tracers refuse to attribute such a trace.

Nothing is lost silently: a step stored with neither text nor tool calls, and a message the importer could
not read (kept as its raw JSON, `SourceStep.unread`), are counted into `metadata["import_warnings"]`, one
line per kind with the count and the first source id; `load_traces(strict=True)` turns them into errors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import ValidationError

from rootstep.model import InputError, Step, StepKind, Trajectory, Verdict

DEFAULT_BENCHMARK = "imported-traces"
CONTENT_NOT_CAPTURED = (
    "no message text in the trace (content capture was off in the instrumentation): "
    "a trace without the agents' words cannot be attributed"
)
_PARTITION_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


@dataclass
class SourceStep:
    """One step as an importer read it; `source_id` is the span / observation / event / message id."""

    agent: str
    kind: StepKind
    content: str = ""
    source_id: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    observation: str | None = None
    started_at: datetime | None = None
    role: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    unread: bool = False
    """The source's message was in a shape no reader knows: `content` is its raw JSON."""


def langgraph_agent(metadata: Any) -> str | None:
    """The agent LangGraph ran a record under: the top-level graph node of `langgraph_checkpoint_ns`
    (`math_expert:<id>|agent:<id>` -> `math_expert`, the supervisor's worker, not its inner `agent` node),
    else `langgraph_node`. `metadata` is a dict, or LangChain metadata flattened as `metadata.<key>`."""
    if not isinstance(metadata, dict):
        return None
    namespace = metadata.get("langgraph_checkpoint_ns", metadata.get("metadata.langgraph_checkpoint_ns"))
    if isinstance(namespace, str) and namespace:
        top = namespace.split("|", 1)[0].split(":", 1)[0]
        if top:
            return top
    node = metadata.get("langgraph_node", metadata.get("metadata.langgraph_node"))
    return str(node) if node else None


def import_warnings(steps: list[SourceStep]) -> list[str]:
    """What an import would lose: steps with no text and no call, messages kept as raw JSON."""
    warnings = []
    empty = [s for s in steps if not s.content.strip() and not s.tool_calls and s.kind in ("agent", "tool")]
    if empty:
        warnings.append(f"{len(empty)} step(s) stored with no text and no tool call (first: {empty[0].source_id or empty[0].agent})")
    no_result = [s for s in steps if s.kind == "tool" and not s.content.strip()]
    if no_result:
        warnings.append(f"{len(no_result)} tool step(s) stored with no result (first: {no_result[0].source_id or no_result[0].agent})")
    unread = [s for s in steps if s.unread]
    if unread:
        warnings.append(f"{len(unread)} message(s) in a shape not read, kept as raw JSON (first: {unread[0].source_id or unread[0].agent})")
    return warnings


def partition_name(value: str, fallback: str) -> str:
    """A framework or benchmark name usable as a partition folder (`openinference.smolagents` stays, spaces go)."""
    cleaned = _PARTITION_UNSAFE.sub("-", value or "").strip("-._+")[:128]
    return cleaned or fallback


def text_of(value: Any) -> str:
    """Message content of any common shape (a string, a list of text parts, a dict with `text`) as text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (text_of(v) for v in value) if t)
    if isinstance(value, dict):
        # plain messages and parts; LangChain's serialised messages keep theirs under `data` or `kwargs`
        for key in ("text", "content", "value", "data", "kwargs", "message", "output"):
            if key in value and value[key] is not None:
                return text_of(value[key])
        if isinstance(value.get("messages"), list) and value["messages"]:
            return text_of(value["messages"][-1])
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def question_text(value: Any) -> str:
    """The question of a run from its root input: a `task` / `question` / `input` / `query` field, the first
    of its `messages`, or the input itself as text."""
    if isinstance(value, dict):
        for key in ("task", "question", "input", "query", "prompt"):
            if isinstance(value.get(key), str):
                return value[key]
        if isinstance(value.get("messages"), list) and value["messages"]:
            return text_of(value["messages"][0])
    return text_of(value)


def json_or_text(value: Any) -> Any:
    """A JSON-encoded attribute decoded; anything else as it is."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def tool_call(name: Any, arguments: Any, call_id: Any = None) -> dict[str, Any]:
    """A tool call as rootstep stores it: `{name, arguments, id?}`, JSON-encoded arguments decoded."""
    call: dict[str, Any] = {"name": str(name or ""), "arguments": json_or_text(arguments)}
    if call_id:
        call["id"] = str(call_id)
    return call


def group(records: list[Any], key: Any) -> dict[Any, list[Any]]:
    """Records by `key(record)`, in first-seen order of the keys and file order within each group."""
    groups: dict[Any, list[Any]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


def from_unix_nano(value: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value) / 1e9, timezone.utc) if value not in (None, "", 0, "0") else None
    except (TypeError, ValueError):
        return None


def from_iso(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _call_lines(calls: list[dict[str, Any]]) -> list[str]:
    return [f"-> {c.get('name', '')}({'' if c.get('arguments') is None else json.dumps(c['arguments'], ensure_ascii=False, default=str)})"
            for c in calls]


def _with_calls(step: SourceStep) -> str:
    """An agent step's text followed by the calls it made (`-> name({...})`): what it said and what it did,
    as a tracer must see it. Tool steps keep the tool's output (their call is in `tool_calls`)."""
    if step.kind != "agent" or not step.tool_calls:
        return step.content
    calls = _call_lines(step.tool_calls)
    return "\n".join([step.content, *calls] if step.content else calls)


def said(content: str, calls: list[dict[str, Any]]) -> str:
    """A stored agent step's own words: its content less the `-> call(...)` lines `build_trajectory` appended."""
    lines = _call_lines(calls)
    if lines and content.endswith("\n".join(lines)):
        return content[: len(content) - len("\n".join(lines))].rstrip("\n")
    return content


def build_trajectory(
    file: str,
    fmt: str,
    steps: list[SourceStep],
    *,
    trace: dict[str, Any],
    framework: str,
    benchmark: str = DEFAULT_BENCHMARK,
    task_id: str,
    question: str = "",
    ground_truth: str | None = None,
    final_answer: str | None = None,
    verdict: Verdict | None = None,
    model: str | None = None,
    started_at: datetime | None = None,
    duration_s: float | None = None,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost_usd: float = 0.0,
    notes: list[str] | None = None,
) -> Trajectory:
    """The trajectory of one trace. `trace` holds the source ids (trace id, session id, ...) kept in metadata."""
    where = f"trace {trace.get('trace_id') or task_id}"
    if not steps:
        raise InputError(file, where, "has no step: no LLM, agent-message or tool record was found in it")
    captured = any(s.content.strip() or any(c.get("arguments") not in (None, "", {}) for c in s.tool_calls)
                   for s in steps if s.kind in ("agent", "tool"))
    built = [
        Step(
            index=i, agent=s.agent or "unknown", kind=s.kind, content=_with_calls(s), role=s.role,
            tool_calls=s.tool_calls, observation=s.observation, started_at=s.started_at,
            metadata={"source_id": s.source_id, **s.extra} if s.source_id else dict(s.extra),
        )
        for i, s in enumerate(steps)
    ]
    metadata: dict[str, Any] = {"trace": {"format": fmt, **{k: v for k, v in trace.items() if v is not None}},
                                "content_captured": captured}
    if not captured:
        metadata["content_note"] = CONTENT_NOT_CAPTURED
    warnings = import_warnings(steps) + list(notes or [])
    if warnings:
        metadata["import_warnings"] = warnings
    try:
        return Trajectory(
            framework=partition_name(framework, "unknown"), benchmark=partition_name(benchmark, DEFAULT_BENCHMARK),
            task_id=task_id, question=question, ground_truth=ground_truth, steps=built, final_answer=final_answer,
            verdict=verdict, model=model, source=file, started_at=started_at, duration_s=duration_s,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost_usd, metadata=metadata,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(file, f"{where}: {'.'.join(str(p) for p in first['loc'])}", first["msg"]) from None
