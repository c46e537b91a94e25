"""Langfuse exports: observations (`agent`, `tool`, `generation`, `span`, `chain`, `event`, ...) of one or more traces.

Accepted shapes: the public API's observations response (`{"data": [ObservationV2, ...], "meta": ...}`,
what the v3+ SDKs' `api.observations` return), a trace with its observations (`{"id", "observations":
[...]}`, the traces API's `TraceWithFullDetails`), a list of such traces, or a bare list of observations.

One trajectory per `traceId`, observations in `startTime` order. A `GENERATION` is an agent step: its
output read in whichever shape the integration stored it (a chat message, LangChain's message with
`additional_kwargs.tool_calls`, GenAI `parts`, a Responses API object with `output[]`, a ChatCompletion).
A `TOOL` is a tool step, and so is a `SPAN` that runs a tool: its name (less `execute_tool `) is a tool
an earlier generation called, or its attributes say `execute_tool` / OpenInference `TOOL`; its arguments
are its `input` (SDK v3's Python-literal text read as data), else the calling generation's. The agent is
the LangGraph agent of the observation's metadata (top-level node of `langgraph_checkpoint_ns`), else the
nearest enclosing `AGENT` observation (`gen_ai.agent.name`, or its name less `invoke_agent `), else the
generation's own name. An observation of level `ERROR` at the root marks the run failed. Tokens and
costs are the generations' `usageDetails` and `costDetails`.
"""

from __future__ import annotations

import ast
import re
from datetime import datetime, timezone
from typing import Any

from rootstep.model import InputError, Trajectory, Verdict
from ._build import (SourceStep, build_trajectory, from_iso, group, json_or_text, langgraph_agent, question_text,
                     seconds_between, tool_call)
from ._messages import first_user_text, read_message

_OBSERVATION_KEYS = {"id", "type", "startTime"}


def observations_of(data: Any) -> tuple[list[Any], dict[str, dict[str, Any]]] | None:
    """(observations, traces by id) of any accepted shape, or None."""
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return data["data"], {}
    if isinstance(data, dict) and isinstance(data.get("observations"), list):
        data = [data]
    if isinstance(data, list) and data and all(isinstance(t, dict) and isinstance(t.get("observations"), list) for t in data):
        return [o for t in data for o in t["observations"]], {t.get("id", ""): t for t in data}
    if isinstance(data, list):
        return data, {}
    return None


def is_langfuse(data: Any) -> tuple[bool, str]:
    found = observations_of(data)
    if found and found[0] and all(isinstance(o, dict) for o in found[0]) and _OBSERVATION_KEYS <= set(found[0][0]) \
            and "traceId" in found[0][0]:
        return True, "observations with id, traceId, type, startTime"
    return False, "no Langfuse observations (objects with id, traceId, type, startTime under `data` or `observations`)"


def _attributes(o: dict[str, Any]) -> dict[str, Any]:
    """The OTel attributes the server kept in the observation's metadata (`metadata.attributes`)."""
    meta = o.get("metadata")
    attributes = meta.get("attributes") if isinstance(meta, dict) else None
    return attributes if isinstance(attributes, dict) else {}


def _langgraph(o: dict[str, Any]) -> str | None:
    meta = o.get("metadata") if isinstance(o.get("metadata"), dict) else {}
    found = langgraph_agent(meta)
    if found:
        return found
    nested = read_metadata(_attributes(o).get("metadata"))
    return langgraph_agent(nested) if nested else None


def read_metadata(value: Any) -> dict[str, Any] | None:
    value = json_or_text(value)
    return value if isinstance(value, dict) else None


def _agent_name(o: dict[str, Any]) -> str:
    attributes = _attributes(o)
    for key in ("gen_ai.agent.name", "agent.name"):
        if attributes.get(key):
            return str(attributes[key])
    return re.sub(r"^invoke_agent\s+", "", str(o.get("name") or "")) or "agent"


def _is_tool_span(o: dict[str, Any], called: set[str]) -> bool:
    attributes = _attributes(o)
    if str(attributes.get("gen_ai.operation.name", "")).lower() == "execute_tool" or \
            str(attributes.get("openinference.span.kind", "")).upper() == "TOOL":
        return True
    return re.sub(r"^execute_tool\s+", "", str(o.get("name") or "")) in called


def _tool_input(name: str, value: Any, earlier: list[SourceStep]) -> dict[str, Any]:
    """A tool observation's call. Langfuse's LangChain handler (SDK v3) stores the input as Python's `str()` of
    the arguments (`"{'a': 3}"`), read as a literal; an input that is not plain data (a LangGraph handoff's
    injected state) gives way to the arguments of the latest generation's call of that tool."""
    arguments = json_or_text(value)
    if isinstance(arguments, str) and arguments[:1] in "{[":
        try:
            arguments = ast.literal_eval(arguments)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    called = next((c for s in reversed(earlier) if s.kind == "agent" for c in s.tool_calls if c.get("name") == name), None)
    if called is not None and (isinstance(arguments, str) or arguments is None):
        return dict(called)
    return tool_call(name, arguments, None if called is None else called.get("id"))


def _number(mapping: Any, *keys: str) -> float:
    if not isinstance(mapping, dict):
        return 0.0
    for key in keys:
        if mapping.get(key) not in (None, ""):
            try:
                return float(mapping[key])
            except (TypeError, ValueError):
                return 0.0
    return 0.0


def load(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    found = observations_of(data)
    if found is None:
        raise InputError(file, "<root>", "expected Langfuse observations")
    observations, traces = found
    for i, o in enumerate(observations):
        if not isinstance(o, dict):
            raise InputError(file, f"observations[{i}]", "expected an object")
        oid = o.get("id") or f"observations[{i}]"
        for key in ("id", "traceId", "type"):
            if not isinstance(o.get(key), str) or not o[key]:
                raise InputError(file, f"observation {oid}: {key}", "missing or not a string")
        if from_iso(o.get("startTime")) is None:
            raise InputError(file, f"observation {oid}: startTime", f"{o.get('startTime')!r} is not an ISO 8601 time")
    by_id = {o["id"]: o for o in observations}
    out = []
    for trace_id, members in group(observations, lambda o: o["traceId"]).items():
        members.sort(key=lambda o: from_iso(o["startTime"]) or datetime.min.replace(tzinfo=timezone.utc))  # checked above
        roots = [o for o in members if o.get("parentObservationId") not in by_id]
        root = roots[0]

        def agent_of(o: dict[str, Any]) -> str:
            found = _langgraph(o)
            if found:
                return found
            node = by_id.get(o.get("parentObservationId") or "")
            while node is not None:
                if node["type"].upper() == "AGENT":
                    return _agent_name(node)
                node = by_id.get(node.get("parentObservationId") or "")
            return str(o.get("name") or "agent")

        steps, called, generations = [], set(), []
        for o in members:
            kind = o["type"].upper()
            extra = {"observation_type": kind, "observation_name": o.get("name")}
            if kind == "GENERATION":
                message = read_message(o.get("output"))
                called |= {c["name"] for c in message.tool_calls}
                generations.append(o)
                if o.get("model"):
                    extra["model"] = o["model"]
                if o.get("usageDetails") or o.get("costDetails"):
                    extra["usage"] = {"usage_details": o.get("usageDetails"), "cost_details": o.get("costDetails")}
                steps.append(SourceStep(agent=agent_of(o), kind="agent", content=message.text, source_id=o["id"],
                                        tool_calls=message.tool_calls, unread=not message.read,
                                        started_at=from_iso(o["startTime"]), role="assistant", extra=extra))
            elif kind == "TOOL" or (kind == "SPAN" and _is_tool_span(o, called)):
                result = read_message(o.get("output"))
                name = re.sub(r"^execute_tool\s+", "", str(o.get("name") or "tool"))
                steps.append(SourceStep(agent=agent_of(o), kind="tool", content=result.text, source_id=o["id"],
                                        unread=not result.read, tool_calls=[_tool_input(name, o.get("input"), steps)],
                                        started_at=from_iso(o["startTime"]), extra=extra))
        trace = traces.get(trace_id, {})
        failed = any(o.get("level") == "ERROR" for o in roots)
        start, end = from_iso(root["startTime"]), from_iso(root.get("endTime"))
        raw_question = trace.get("input", root.get("input"))
        question = first_user_text(raw_question) or (question_text(raw_question) if raw_question is not None else "")
        if not question and generations:
            question = first_user_text(generations[0].get("input"))
        final = read_message(trace.get("output", root.get("output"))).text or next(
            (s.content for s in reversed(steps) if s.kind == "agent" and s.content), "")
        out.append(build_trajectory(
            file, "langfuse", steps,
            trace={"trace_id": trace_id, "root_observation_id": root["id"], "session_id": trace.get("sessionId") or root.get("sessionId")},
            framework=framework or _framework(members), benchmark=benchmark or "imported-traces", task_id=trace_id,
            question=question, final_answer=final or None,
            verdict=Verdict(success=False, details={"source": "langfuse root level ERROR", "message": root.get("statusMessage")}) if failed else None,
            model=next((s.extra["model"] for s in steps if "model" in s.extra), None), started_at=start,
            duration_s=seconds_between(start, end),
            prompt_tokens=int(sum(_number(o.get("usageDetails"), "input", "prompt_tokens", "input_tokens") for o in generations)),
            completion_tokens=int(sum(_number(o.get("usageDetails"), "output", "completion_tokens", "output_tokens") for o in generations)),
            cost_usd=sum(_number(o.get("costDetails"), "total") or _number(o, "totalCost", "calculatedTotalCost") for o in generations),
        ))
    return out


_SCOPES = {"langfuse-sdk": None, "openinference.instrumentation.openai_agents": "openai-agents",
           "openinference.instrumentation.langchain": "langchain", "agent_framework": "agent-framework"}


def _framework(members: list[dict[str, Any]]) -> str:
    """The framework the observations came from: LangGraph metadata, else the OTel instrumentation scope the server
    kept (`metadata.scope.name`), else `langfuse`."""
    if any(_langgraph(o) for o in members):
        return "langgraph"
    for o in members:
        meta = o.get("metadata")
        found = meta.get("scope") if isinstance(meta, dict) else None
        scope = found.get("name") if isinstance(found, dict) else None
        if _SCOPES.get(str(scope)):
            return str(_SCOPES[str(scope)])
    return "langfuse"
