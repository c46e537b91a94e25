"""Phoenix's REST span list: what `GET /v1/projects/{project}/spans` answers (and `phoenix.client`'s
`spans.get_spans` returns as a list).

A body `{"data": [span, ...], "next_cursor": ...}` (pages appended into one `data`, or one page per line
as JSON Lines), or a bare list of spans. Each span: `context.{trace_id, span_id}`, `parent_id`, `name`,
`span_kind` (OpenInference's kind), ISO `start_time` / `end_time`, `status_code`, `events`, and its
OpenInference `attributes` as one flat mapping (`llm.output_messages.0.message.content`, LangChain's
metadata as `metadata.langgraph_node`). The spans are read into the OTLP importer's spans and mapped
exactly as OTLP/JSON with OpenInference attributes is (otlp.py), format `phoenix`.

Phoenix's other export, OTLP itself (`px.Client().get_trace_dataset()` written as OTLP, or a Collector
in front of Phoenix), is the `otlp` format.
"""

from __future__ import annotations

from typing import Any

from rootstep.model import InputError, Trajectory
from ._build import from_iso
from .otlp import Span, from_spans

_SPAN_KEYS = {"context", "span_kind", "start_time"}


def spans_of(data: Any) -> list[Any] | None:
    """The span objects of any accepted shape, or None."""
    pages = data if isinstance(data, list) and data and all(isinstance(p, dict) and "data" in p for p in data) else [data]
    spans: list[Any] = []
    for page in pages:
        if isinstance(page, dict) and isinstance(page.get("data"), list):
            spans += page["data"]
        elif isinstance(page, list):
            spans += page
        else:
            return None
    return spans


def is_phoenix(data: Any) -> tuple[bool, str]:
    spans = spans_of(data)
    if spans and isinstance(spans[0], dict) and _SPAN_KEYS <= set(spans[0]) and isinstance(spans[0].get("context"), dict):
        return True, "Phoenix REST spans (context, span_kind, start_time)"
    return False, "no Phoenix REST spans (objects with context.span_id, span_kind, start_time under `data`)"


def _nanos(value: Any, file: str, where: str) -> int:
    when = from_iso(value)
    if when is None:
        raise InputError(file, where, f"{value!r} is not an ISO 8601 time")
    return int(when.timestamp() * 1_000_000) * 1000


def _span(raw: Any, position: int, file: str) -> Span:
    if not isinstance(raw, dict):
        raise InputError(file, f"data[{position}]", f"expected a span object, found {type(raw).__name__}")
    found = raw.get("context")
    context: dict[str, Any] = found if isinstance(found, dict) else {}
    span_id, trace_id = context.get("span_id"), context.get("trace_id")
    if not isinstance(span_id, str) or not span_id:
        raise InputError(file, f"data[{position}].context.span_id", "missing or not a string")
    where = f"span {span_id}"
    if not isinstance(trace_id, str) or not trace_id:
        raise InputError(file, f"{where}: context.trace_id", "missing or not a string")
    attributes = raw.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InputError(file, f"{where}: attributes", f"expected an object, found {type(attributes).__name__}")
    attributes = dict(attributes)
    if raw.get("span_kind") and "openinference.span.kind" not in attributes:
        attributes["openinference.span.kind"] = raw["span_kind"]
    events = [{"name": e.get("name", ""), "attributes": e.get("attributes") or {}}
              for e in raw.get("events") or [] if isinstance(e, dict)]
    code = str(raw.get("status_code") or "UNSET").upper()
    return Span(
        trace_id=trace_id.lower(), span_id=span_id.lower(), parent_id=(raw.get("parent_id") or None),
        name=str(raw.get("name", "")), start=_nanos(raw.get("start_time"), file, f"{where}: start_time"),
        end=_nanos(raw.get("end_time") or raw.get("start_time"), file, f"{where}: end_time"),
        attributes=attributes, events=events, status={"code": code, "message": raw.get("status_message")},
        service=None, scope="", position=position,
    )


def load(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    """Trajectories of a Phoenix REST span list (one per trace, as for OTLP)."""
    raw = spans_of(data)
    if raw is None:
        raise InputError(file, "<root>", "expected Phoenix spans under `data`")
    if not raw:
        raise InputError(file, "data", "holds no span")
    return from_spans([_span(s, i, file) for i, s in enumerate(raw)], file, framework, benchmark, fmt="phoenix")
