"""Send the verdict back: who and when, per attributed run, in the shape the source tool ingests.

A run's verdict is its label (the `labels` view: the latest verified label) or, failing that, its latest
labelled annotation of any method (a tracer's prediction from `rootstep evaluate`). Each verdict names
the agent, the 0-based step, the source id of that step (the span / observation / event id the importer
kept), the trace id, the reason and the method.

* `otlp`: an OTLP/JSON `ExportTraceServiceRequest` with one span `rootstep.verdict` per run, in the source
  trace (its trace id) and a child of the decisive span, carrying `rootstep.verdict.*` attributes and a
  `gen_ai.evaluation.result` event (the GenAI conventions' evaluation event).
* `langfuse`: a list of Langfuse `CreateScoreRequest` bodies (`POST /api/public/scores`), a BOOLEAN score
  `rootstep_decisive_error` on the decisive observation, the reason as comment, the rest as metadata.
* `phoenix`: a Phoenix `AnnotateSpansRequestBody` (`POST /v1/span_annotations`): one span annotation per
  run on the decisive span, label = the agent, explanation = the reason.
* `atif`: one ATIF trajectory file per run (`<out>/<run id>.json`) with the verdict in `extra`.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Sequence

from rootstep.model import Annotation, Trajectory, content_id
from rootstep.warehouse import Warehouse, annotation_from_row, write_text
from .atif import to_atif

VERDICT_FORMATS = ("otlp", "langfuse", "phoenix", "atif")
SCORE_NAME = "rootstep_decisive_error"
_LATEST_LABELLED = (
    "SELECT * FROM annotations WHERE status = 'labelled' "
    "QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY verified DESC, created_at DESC, id DESC) = 1"
)


def verdicts(warehouse: Warehouse, where: str = "true", params: Sequence[Any] | None = None
             ) -> list[tuple[str, Trajectory, Annotation]]:
    """(run id, trajectory, verdict) of every run matching `where` (SQL over `runs`) that has one."""
    best = {r["run_id"]: annotation_from_row(r) for r in warehouse.rows(_LATEST_LABELLED)}
    return [(run_id, t, best[run_id]) for run_id, t in warehouse.trajectories(where, params) if run_id in best]


def _ids(trajectory: Trajectory, verdict: Annotation) -> dict[str, Any]:
    trace = trajectory.metadata.get("trace") or {}
    step = trajectory.steps[verdict.step] if verdict.step is not None and verdict.step < len(trajectory.steps) else None
    source = None if step is None else step.metadata.get("source_id")
    return {"trace_id": trace.get("trace_id"), "source_id": source,
            "step_trace_id": None if step is None else step.metadata.get("trace_id"), "format": trace.get("format")}


def _fields(run_id: str, trajectory: Trajectory, verdict: Annotation) -> dict[str, Any]:
    ids = _ids(trajectory, verdict)
    return {"run_id": run_id, "agent": verdict.agent, "step": verdict.step, "source_span_id": ids["source_id"],
            "trace_id": ids["trace_id"], "reason": verdict.evidence.reason, "method": verdict.method,
            "annotator": verdict.annotator, "verified": verdict.verified, "source_format": ids["format"]}


def _hex(value: Any, digits: int, seed: str) -> str:
    """`value` if it is already an OTLP id of `digits` hex digits, else one derived from `seed`."""
    text = str(value or "")
    if len(text) == digits and all(c in "0123456789abcdef" for c in text.lower()):
        return text.lower()
    return content_id("otlp", seed, text).split("_", 1)[-1].ljust(digits, "0")[:digits]


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": "" if value is None else str(value)}


def to_otlp(items: list[tuple[str, Trajectory, Annotation]]) -> dict[str, Any]:
    spans = []
    for run_id, t, v in items:
        f = _fields(run_id, t, v)
        step = v.step
        assert step is not None, f"{run_id}: a verdict names its step"  # the export reads labels only
        trace_id = _hex(_ids(t, v)["step_trace_id"] or f["trace_id"], 32, run_id)
        parent = _hex(f["source_span_id"], 16, f"{run_id}/{step}") if f["source_span_id"] else None
        end = t.steps[step].started_at if t.steps[step].started_at else t.started_at
        nanos = str(int(end.timestamp() * 1e9)) if end else "0"
        attributes = [{"key": f"rootstep.verdict.{k}", "value": _any(val)} for k, val in f.items() if val is not None]
        event = [{"key": "gen_ai.evaluation.name", "value": _any(SCORE_NAME)},
                 {"key": "gen_ai.evaluation.score.label", "value": _any(v.agent)},
                 {"key": "gen_ai.evaluation.score.value", "value": _any(float(step))},
                 {"key": "gen_ai.evaluation.explanation", "value": _any(v.evidence.reason or "")}]
        span = {"traceId": trace_id, "spanId": _hex(None, 16, f"verdict/{run_id}/{v.id}"), "name": "rootstep.verdict",
                "kind": 1, "startTimeUnixNano": nanos, "endTimeUnixNano": nanos, "attributes": attributes,
                "events": [{"timeUnixNano": nanos, "name": "gen_ai.evaluation.result", "attributes": event}],
                "status": {"code": 1}}
        if parent:
            span["parentSpanId"] = parent
        spans.append(span)
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": _any("rootstep")}]},
                               "scopeSpans": [{"scope": {"name": "rootstep.verdicts"}, "spans": spans}]}]}


def to_langfuse(items: list[tuple[str, Trajectory, Annotation]]) -> list[dict[str, Any]]:
    out = []
    for run_id, t, v in items:
        f = _fields(run_id, t, v)
        score = {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"rootstep:{v.id}")), "traceId": str(f["trace_id"] or run_id),
                 "name": SCORE_NAME, "value": 1, "dataType": "BOOLEAN",
                 "comment": f"{v.agent} at step {v.step}: {v.evidence.reason or 'no reason given'}",
                 "metadata": {k: val for k, val in f.items() if val is not None}}
        if f["source_span_id"]:
            score["observationId"] = str(f["source_span_id"])
        out.append(score)
    return out


def to_phoenix(items: list[tuple[str, Trajectory, Annotation]]) -> dict[str, Any]:
    data = []
    for run_id, t, v in items:
        f = _fields(run_id, t, v)
        kind = "HUMAN" if v.method == "human" else "LLM" if v.method == "tracer" else "CODE"
        result = {"label": str(v.agent), "score": 1.0}
        if v.evidence.reason:
            result["explanation"] = v.evidence.reason
        data.append({"span_id": _hex(f["source_span_id"], 16, f"{run_id}/{v.step}"), "name": SCORE_NAME,
                     "annotator_kind": kind, "result": result, "identifier": f"rootstep:{v.annotator or v.method}",
                     "metadata": {k: val for k, val in f.items() if val is not None}})
    return {"data": data}


def export_verdicts(warehouse: Warehouse, out: str | Path, format: str = "otlp", where: str = "true",
                    params: Sequence[Any] | None = None) -> int:
    """Write the verdicts of the selected runs to `out` (a file; a folder for `atif`); returns how many."""
    if format not in VERDICT_FORMATS:
        raise ValueError(f"format {format!r} is unknown; choose one of {', '.join(VERDICT_FORMATS)}")
    items = verdicts(warehouse, where, params)
    out = Path(out)
    if format == "atif":
        for run_id, t, v in items:
            write_text(out / f"{run_id}.json", json.dumps(to_atif(run_id, t, v), indent=1, ensure_ascii=False) + "\n")
        return len(items)
    document = {"otlp": to_otlp, "langfuse": to_langfuse, "phoenix": to_phoenix}[format](items)
    write_text(out, json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return len(items)
