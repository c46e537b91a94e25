"""OpenTelemetry OTLP/JSON traces with the GenAI semantic conventions or OpenInference attributes.

Reads what an OpenTelemetry Collector's file exporter, Phoenix or any OTLP/JSON dump holds: one
`ExportTraceServiceRequest` (`{"resourceSpans": [...]}`) per file or per line (JSON Lines). Ids may be hex
(the OTLP/JSON rule) or base64 (protobuf's generic JSON mapping).

Mapping (docs/traces.md has the table):

* a step per LLM span (`openinference.span.kind = LLM`, or `gen_ai.operation.name` chat / text_completion /
  generate_content, or an older GenAI span with `gen_ai.prompt*` / `gen_ai.completion*`) and per tool span
  (`TOOL`, `execute_tool`), in start order; agent, chain and other spans only give context;
* the agent of a step is the span's own `gen_ai.agent.name` / `agent.name`, else the nearest enclosing agent
  span (`AGENT`, `invoke_agent`; its `gen_ai.agent.name`, `agent.name` or its name without `.run`), else the
  nearest LangGraph node (`metadata.langgraph_node`), else the service name;
* an LLM step's text is its output messages (`gen_ai.output.messages`, `llm.output_messages.*`, the older
  `gen_ai.completion` attribute, flattened `gen_ai.completion.N.*` or `gen_ai.content.completion` /
  `gen_ai.choice` span events) and its tool calls; a tool step's text is the tool's result;
* one trajectory per trace, traces whose root span has the same conversation id (`gen_ai.conversation.id`,
  `session.id`) joined into one, in start order.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from rootstep.model import InputError, Trajectory, Verdict
from ._build import (SourceStep, build_trajectory, from_unix_nano, group, json_or_text, langgraph_agent, question_text,
                     text_of, tool_call)
from ._messages import first_user_text, read_message

LLM_OPERATIONS = {"chat", "text_completion", "generate_content"}
AGENT_OPERATIONS = {"invoke_agent", "create_agent", "invoke_workflow"}
_HEX_ID = re.compile(r"^[0-9a-fA-F]+$")
_FRAMEWORK_SCOPES = {
    "openinference.instrumentation.smolagents": "smolagents",
    "openinference.instrumentation.langchain": "langchain",
    "openinference.instrumentation.crewai": "crewai",
    "openinference.instrumentation.autogen": "ag2",
    "openinference.instrumentation.openai_agents": "openai-agents",
    "pydantic-ai": "pydantic-ai",
    "agent_framework": "agent-framework",
}


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    status: dict[str, Any]
    service: str | None
    scope: str
    position: int
    children: list["Span"] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """llm, tool, agent or other."""
        a = self.attributes
        oi = str(a.get("openinference.span.kind", "")).upper()
        op = str(a.get("gen_ai.operation.name", "")).lower()
        if oi == "LLM" or op in LLM_OPERATIONS:
            return "llm"
        if oi == "TOOL" or op == "execute_tool":
            return "tool"
        if oi == "AGENT" or op in AGENT_OPERATIONS:
            return "agent"
        if not op and not oi and any(k.startswith(("gen_ai.prompt", "gen_ai.completion")) for k in a):
            return "llm"  # the older GenAI conventions (and OpenLLMetry) had no operation name on chat spans
        return "other"

    @property
    def conventions(self) -> set[str]:
        keys = self.attributes.keys()
        found = set()
        if any(k.startswith(("openinference.", "llm.", "input.value", "tool.name")) for k in keys):
            found.add("openinference")
        if any(k.startswith("gen_ai.") for k in keys):
            found.add("gen_ai")
        return found


# ------------------------------------------------------------------------------------ reading OTLP/JSON


def _any_value(value: Any, file: str, where: str) -> Any:
    """An OTLP `AnyValue` as a Python value."""
    if not isinstance(value, dict):
        raise InputError(file, where, f"expected an AnyValue object, found {type(value).__name__}")
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            raise InputError(file, where, f"intValue {value['intValue']!r} is not an integer") from None
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_any_value(v, file, f"{where}[{i}]") for i, v in enumerate(value["arrayValue"].get("values", []))]
    if "kvlistValue" in value:
        return _attributes(value["kvlistValue"].get("values", []), file, where)
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attributes(items: Any, file: str, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise InputError(file, where, f"expected a list of key/value pairs, found {type(items).__name__}")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "key" not in item:
            raise InputError(file, f"{where}[{i}]", "expected {\"key\": ..., \"value\": {...}}")
        out[item["key"]] = _any_value(item.get("value", {}), file, f"{where}.{item['key']}")
    return out


def _span_id(value: Any, size: int, file: str, where: str) -> str:
    """A trace or span id as lowercase hex: OTLP/JSON writes hex, protobuf's JSON mapping base64."""
    if not isinstance(value, str) or not value:
        raise InputError(file, where, "missing or not a string")
    if len(value) == 2 * size and _HEX_ID.match(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise InputError(file, where, f"{value!r} is neither {2 * size} hex digits nor a base64 {size}-byte id")
    return raw.hex()


def _nanos(span: dict[str, Any], key: str, file: str, where: str) -> int:
    value = span.get(key, 0)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError(file, f"{where}.{key}", f"{value!r} is not a time in nanoseconds") from None


def read_spans(data: Any, file: str) -> list[Span]:
    """Every span of one or more `ExportTraceServiceRequest`s; errors name the span id and the field."""
    requests = data if isinstance(data, list) else [data]
    spans: list[Span] = []
    for r, request in enumerate(requests):
        if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
            raise InputError(file, f"[{r}].resourceSpans" if len(requests) > 1 else "resourceSpans",
                             "missing: expected an OTLP ExportTraceServiceRequest")
        for rs_i, rs in enumerate(request["resourceSpans"]):
            resource = _attributes((rs.get("resource") or {}).get("attributes"), file,
                                   f"resourceSpans[{rs_i}].resource.attributes")
            for ss_i, ss in enumerate(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []):
                scope = str((ss.get("scope") or ss.get("instrumentationLibrary") or {}).get("name", ""))
                for sp_i, raw in enumerate(ss.get("spans") or []):
                    spans.append(_span(raw, resource, scope, len(spans), file, f"resourceSpans[{rs_i}].scopeSpans[{ss_i}].spans[{sp_i}]"))
    return spans


def _span(raw: Any, resource: dict[str, Any], scope: str, position: int, file: str, path: str) -> Span:
    if not isinstance(raw, dict):
        raise InputError(file, path, f"expected a span object, found {type(raw).__name__}")
    span_id = _span_id(raw.get("spanId"), 8, file, f"{path}.spanId")
    where = f"span {span_id}"
    trace_id = _span_id(raw.get("traceId"), 16, file, f"{where}: traceId")
    parent = raw.get("parentSpanId") or None
    events = []
    for e_i, event in enumerate(raw.get("events") or []):
        if not isinstance(event, dict):
            raise InputError(file, f"{where}: events[{e_i}]", "expected an event object")
        events.append({"name": event.get("name", ""),
                       "attributes": _attributes(event.get("attributes"), file, f"{where}: events[{e_i}].attributes")})
    status = raw.get("status") or {}
    if not isinstance(status, dict):
        raise InputError(file, f"{where}: status", "expected an object")
    return Span(
        trace_id=trace_id, span_id=span_id,
        parent_id=None if parent is None else _span_id(parent, 8, file, f"{where}: parentSpanId"),
        name=str(raw.get("name", "")), start=_nanos(raw, "startTimeUnixNano", file, where),
        end=_nanos(raw, "endTimeUnixNano", file, where),
        attributes=_attributes(raw.get("attributes"), file, f"{where}: attributes"), events=events, status=status,
        service=resource.get("service.name"), scope=scope, position=position,
    )


def is_otlp(data: Any) -> tuple[bool, str]:
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, dict) and isinstance(first.get("resourceSpans"), list):
        return True, "has resourceSpans"
    return False, "no top-level `resourceSpans` list (an OTLP ExportTraceServiceRequest has one)"


# ------------------------------------------------------------------------------------ attribute readers


def _indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened `prefix.N.rest` attributes as a list of dicts `{rest: value}` in N order."""
    groups: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in attributes.items():
        if key.startswith(prefix + "."):
            index, _, rest = key[len(prefix) + 1:].partition(".")
            if index.isdigit() and rest:
                groups[int(index)][rest] = value
    return [groups[i] for i in sorted(groups)]


def _openinference_messages(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`llm.input_messages` / `llm.output_messages` as `{role, content, tool_calls}`."""
    out = []
    for flat in _indexed(attributes, prefix):
        content = flat.get("message.content")
        if content is None:
            parts = sorted((k, v) for k, v in flat.items() if k.startswith("message.contents.") and k.endswith(".message_content.text"))
            content = "\n".join(str(v) for _, v in parts) if parts else None
        calls = []
        for call in _indexed({k[len("message."):]: v for k, v in flat.items() if k.startswith("message.tool_calls.")}, "tool_calls"):
            calls.append(tool_call(str(call.get("tool_call.function.name", "")), call.get("tool_call.function.arguments"),
                                   call.get("tool_call.id")))
        out.append({"role": flat.get("message.role"), "content": content, "tool_calls": calls,
                    "name": flat.get("message.name")})
    return out


def _genai_messages(value: Any) -> list[dict[str, Any]]:
    """`gen_ai.input.messages` / `gen_ai.output.messages` (`parts`), or the older list of `{role, content}`."""
    value = json_or_text(value)
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, str):
        return [{"role": None, "content": value, "tool_calls": []}]
    out = []
    for message in value if isinstance(value, list) else []:
        read = read_message(message)
        out.append({"role": read.role or (message.get("role") if isinstance(message, dict) else None),
                    "content": read.text or None, "tool_calls": read.tool_calls, "unread": not read.read})
    return out


def _legacy_messages(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenLLMetry's flattened `gen_ai.prompt.N.role/content` and `gen_ai.completion.N.*`."""
    out = []
    for flat in _indexed(attributes, prefix):
        calls = [tool_call(str(c.get("name", "")), c.get("arguments"), c.get("id"))
                 for c in _indexed({k: v for k, v in flat.items() if k.startswith("tool_calls.")}, "tool_calls")]
        out.append({"role": flat.get("role"), "content": flat.get("content"), "tool_calls": calls})
    return out


def messages(span: Span, direction: str) -> list[dict[str, Any]]:
    """The span's input or output messages under whichever convention it uses."""
    a = span.attributes
    oi, genai, legacy = (("llm.input_messages", "gen_ai.input.messages", "gen_ai.prompt") if direction == "input"
                         else ("llm.output_messages", "gen_ai.output.messages", "gen_ai.completion"))
    if genai in a:
        return _genai_messages(a[genai])
    found = _openinference_messages(a, oi)
    if found:
        return found
    if legacy in a:
        return _genai_messages(a[legacy])
    found = _legacy_messages(a, legacy)
    if found:
        return found
    event_names = ({"gen_ai.content.prompt", "gen_ai.user.message", "gen_ai.system.message"} if direction == "input"
                   else {"gen_ai.content.completion", "gen_ai.choice"})
    out = []
    for event in span.events:
        if event["name"] in event_names:
            ea = event["attributes"]
            value = ea.get(legacy, ea.get("message", ea.get("content", ea.get("body"))))
            out += _genai_messages(value)
    return out


def _agent_name(span: Span) -> str | None:
    a = span.attributes
    for key in ("gen_ai.agent.name", "agent.name"):
        if a.get(key):
            return str(a[key])
    return None


def _langgraph_node(span: Span) -> str | None:
    """The LangGraph agent of a span: LangChain's `metadata` (a JSON attribute in OTLP, flattened
    `metadata.*` keys in Phoenix's REST spans), else OpenInference's `graph.node.name`."""
    a = span.attributes
    meta = json_or_text(a.get("metadata"))
    found = langgraph_agent(meta) if isinstance(meta, dict) else langgraph_agent(a)
    return found or a.get("graph.node.name") or None


def agent_of(span: Span, by_id: dict[str, Span]) -> str:
    own = _agent_name(span)
    if own:
        return own
    node: Span | None = span
    while node is not None:
        if node.kind == "agent":
            return _agent_name(node) or re.sub(r"(\.run|\s+run)$", "", re.sub(r"^invoke_agent\s+", "", node.name)) or "agent"
        graph_node = _langgraph_node(node)
        if graph_node:
            return graph_node
        node = by_id.get(node.parent_id) if node.parent_id else None
    return span.service or "agent"


def _tool_arguments(span: Span) -> Any:
    a = span.attributes
    if "gen_ai.tool.call.arguments" in a:
        return json_or_text(a["gen_ai.tool.call.arguments"])
    value = json_or_text(a.get("input.value"))
    if isinstance(value, dict) and "kwargs" in value:  # smolagents' instrumentor wraps the call's args/kwargs
        return value["kwargs"] or value.get("args")
    return value


def _step(span: Span, by_id: dict[str, Span]) -> SourceStep:
    a = span.attributes
    agent = agent_of(span, by_id)
    extra: dict[str, Any] = {"trace_id": span.trace_id, "span_name": span.name}
    if span.kind == "tool":
        name = str(a.get("gen_ai.tool.name") or a.get("tool.name") or span.name)
        result = read_message(a.get("gen_ai.tool.call.result", a.get("output.value")))
        return SourceStep(agent=agent, kind="tool", content=result.text, source_id=span.span_id, unread=not result.read,
                          tool_calls=[tool_call(name, _tool_arguments(span), a.get("gen_ai.tool.call.id") or a.get("tool_call.id"))],
                          started_at=from_unix_nano(span.start), extra=extra)
    output = messages(span, "output")
    text = "\n".join(text_of(m["content"]) for m in output if m.get("content"))
    calls = [c for m in output for c in m.get("tool_calls", [])]
    unread = any(m.get("unread") for m in output)
    if "output.value" in a and (not output or not (text or calls)):  # only the raw output (a Responses object, ...)
        raw = read_message(a["output.value"])
        text, calls, unread = raw.text, raw.tool_calls, not raw.read
    model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model") or a.get("llm.model_name")
    if model:
        extra["model"] = str(model)
    usage = {k: a[k] for k in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "llm.token_count.prompt",
                               "llm.token_count.completion", "llm.cost.total", "gen_ai.usage.cost") if k in a}
    if usage:
        extra["usage"] = usage
    return SourceStep(agent=agent, kind="agent", content=text, source_id=span.span_id, tool_calls=calls, unread=unread,
                      started_at=from_unix_nano(span.start), role="assistant", extra=extra)


def _question(root: Span, steps_spans: list[Span]) -> str:
    raw = root.attributes.get("input.value", root.attributes.get("gen_ai.input.messages"))
    question = first_user_text(raw) or (question_text(json_or_text(raw)) if raw is not None else "")
    if question:
        return question
    for span in steps_spans:
        if span.kind == "llm":
            for m in messages(span, "input"):
                if m.get("role") == "user" and m.get("content"):
                    return text_of(m["content"])
    return ""


def _final_answer(root: Span, steps: list[SourceStep]) -> str | None:
    a = root.attributes
    for key in ("output.value", "final_result", "gen_ai.output.messages", "gen_ai.tool.call.result"):
        if a.get(key) not in (None, ""):
            read = read_message(a[key])
            if read.text:
                return read.text
    last = next((s for s in reversed(steps) if s.kind == "agent" and s.content), None)
    return None if last is None else last.content


def _framework(spans: list[Span], default: str = "otlp") -> str:
    scopes = {s.scope for s in spans}
    for scope in scopes:
        if scope in _FRAMEWORK_SCOPES:
            name = _FRAMEWORK_SCOPES[scope]
            if name == "langchain" and any(_langgraph_node(s) for s in spans):
                return "langgraph"
            return name
    if any(_langgraph_node(s) for s in spans):
        return "langgraph"
    return next((s.service for s in spans if s.service), None) or default


def load(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    """Trajectories of an OTLP/JSON document (one per trace, or per conversation when root spans share one)."""
    spans = read_spans(data, file)
    if not spans:
        raise InputError(file, "resourceSpans", "holds no span")
    return from_spans(spans, file, framework, benchmark)


def _number(span: Span, *keys: str) -> float:
    for key in keys:
        value = span.attributes.get(key)
        if value not in (None, ""):
            try:
                return float(value)
            except (TypeError, ValueError):
                return 0.0
    return 0.0


def from_spans(spans: list[Span], file: str, framework: str | None = None, benchmark: str | None = None,
               fmt: str | None = None) -> list[Trajectory]:
    """Trajectories of spans read from any source (OTLP/JSON, Phoenix's REST span list)."""
    by_id = {s.span_id: s for s in spans}
    by_trace = group(spans, lambda s: s.trace_id)
    sessions: dict[str, list[str]] = {}
    for trace_id, members in by_trace.items():
        root = min((s for s in members if s.parent_id not in by_id), key=lambda s: (s.start, s.position), default=members[0])
        conversation = root.attributes.get("gen_ai.conversation.id") or root.attributes.get("session.id")
        sessions.setdefault(f"conversation:{conversation}" if conversation else f"trace:{trace_id}", []).append(trace_id)
    out = []
    for key, trace_ids in sessions.items():
        members = sorted((s for t in trace_ids for s in by_trace[t]), key=lambda s: (s.start, s.position))
        roots = [s for s in members if s.parent_id not in by_id]
        root = roots[0] if roots else members[0]
        step_spans = [s for s in members if s.kind in ("llm", "tool")]
        steps = [_step(s, by_id) for s in step_spans]
        conventions = sorted(set().union(*(s.conventions for s in members)))
        status = root.status or {}
        failed = status.get("code") in (2, "STATUS_CODE_ERROR", "ERROR")
        verdict = None if not failed else Verdict(success=False, score=0.0,
                                                  details={"source": "otlp root span status", "message": status.get("message")})
        llm = [s for s in step_spans if s.kind == "llm"]
        model = next((s.extra["model"] for s in steps if "model" in s.extra), None)
        verdicts = [{k[len("rootstep.verdict."):]: v for k, v in s.attributes.items() if k.startswith("rootstep.verdict.")}
                    for s in members if s.name == "rootstep.verdict"]  # rootstep's own export, sent back into the trace
        out.append(build_trajectory(
            file, fmt or ("openinference" if conventions == ["openinference"] else "otlp"), steps,
            trace={"trace_id": trace_ids[0], "trace_ids": trace_ids, "root_span_id": root.span_id,
                   "conversation_id": key.split(":", 1)[1] if key.startswith("conversation:") else None,
                   "conventions": conventions, "service": root.service, "rootstep_verdicts": verdicts or None},
            framework=framework or _framework(members, fmt or "otlp"), benchmark=benchmark or "imported-traces",
            task_id=trace_ids[0], question=_question(root, step_spans), final_answer=_final_answer(root, steps),
            verdict=verdict, model=model, started_at=from_unix_nano(root.start),
            duration_s=max(0.0, (max(s.end for s in members) - root.start) / 1e9),
            prompt_tokens=int(sum(_number(s, "gen_ai.usage.input_tokens", "llm.token_count.prompt") for s in llm)),
            completion_tokens=int(sum(_number(s, "gen_ai.usage.output_tokens", "llm.token_count.completion") for s in llm)),
            cost_usd=sum(_number(s, "llm.cost.total", "gen_ai.usage.cost") for s in llm),
        ))
    return out
