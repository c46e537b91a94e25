"""Arrow schemas of the warehouse tables and the conversion between models and rows.

Every table is hive-partitioned by `framework` and `benchmark`: those two columns live in the
folder names, not in the files. Nested free-form data (metadata, tool calls, requests) is stored as
JSON text so any engine can read it (DuckDB: `json_extract`, pandas: `json.loads`).

A run's `Recording` and `ReplayProvenance` have their own columns (`RECORDING_COLUMNS`, `REPLAY_COLUMNS`).
Runs written before those columns existed kept the same facts in `metadata` (`gateway_run_id`, `task`,
`agent_models`, `image`, `framework_version`, `system`, `replay`): the catalog's `runs` view fills the
columns from there (`LEGACY_RUN_COLUMNS`), and `trajectory_from_rows` drops the keys from `metadata`.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from rootstep.model import (
    Annotation,
    Asked,
    Evidence,
    Intervention,
    LLMCall,
    Recording,
    Replay,
    ReplayProvenance,
    Step,
    SystemRef,
    Task,
    Trajectory,
    Usage,
    Verdict,
    WarehouseError,
)

PARTITION_COLUMNS = ("framework", "benchmark")
TS = pa.timestamp("us", tz="UTC")


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, default=str)


def _unjson(text: str | None) -> Any:
    return None if text is None else json.loads(text)


RECORDING_COLUMNS: list[tuple[str, pa.DataType]] = [
    (name, pa.string())
    for name in ("gateway_run_id", "task", "agent_models", "image", "framework_version", "system_file", "system_name",
                 "system_digest")
]
"""`Trajectory.recording`: `task` is the Task as JSON, `agent_models` a JSON object; all NULL for imported runs."""

REPLAY_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("replay_of_gateway_run_id", pa.string()),
    ("replay_step", pa.int32()),
    ("replay_kind", pa.string()),
    ("replay_intervention", pa.string()),
    ("replay_live_calls", pa.int64()),
    ("replay_replayed_calls", pa.int64()),
    ("replay_forced_calls", pa.int64()),
    ("replay_divergence", pa.string()),
    ("replay_prefix_identical", pa.bool_()),
    ("replay_identical", pa.bool_()),
]
"""`Trajectory.replay`: which recorded run, which step was forced and its kind (`fix`, `corruption`,
`control`; NULL for an exact replay), the whole intervention as JSON, and what the gateway counted."""


def _meta(path: str, sql_type: str | None = None, as_json: bool = False) -> str:
    if as_json:
        return f"CAST(json_extract(metadata, '$.{path}') AS VARCHAR)"
    text = f"json_extract_string(metadata, '$.{path}')"
    return text if sql_type is None else f"TRY_CAST({text} AS {sql_type})"


LEGACY_RUN_COLUMNS: dict[str, str] = {
    "gateway_run_id": _meta("gateway_run_id"),
    "task": _meta("task", as_json=True),
    "agent_models": _meta("agent_models", as_json=True),
    "image": _meta("image"),
    "framework_version": _meta("framework_version"),
    "system_file": _meta("system.file"),
    "system_name": _meta("system.name"),
    "system_digest": _meta("system.digest"),
    "replay_of_gateway_run_id": _meta("replay.of_gateway_run_id"),
    "replay_step": _meta("replay.intervention.step", "INTEGER"),
    "replay_kind": _meta("replay.intervention.kind"),
    "replay_intervention": _meta("replay.intervention", as_json=True),
    "replay_live_calls": _meta("replay.live_calls", "BIGINT"),
    "replay_replayed_calls": _meta("replay.replayed_calls", "BIGINT"),
    "replay_forced_calls": _meta("replay.forced_calls", "BIGINT"),
    "replay_divergence": _meta("replay.divergence"),
    "replay_prefix_identical": _meta("replay.prefix_identical", "BOOLEAN"),
    "replay_identical": _meta("replay.identical", "BOOLEAN"),
}
"""Where a run row written before the recording columns existed kept each of them (SQL over `metadata`)."""

LEGACY_METADATA_KEYS = ("gateway_run_id", "task", "agent_models", "image", "framework_version", "system", "replay")


EDIT = pa.struct([("chars_changed", pa.int64()), ("lines_changed", pa.int64()), ("share", pa.float64()),
                  ("growth", pa.float64()), ("summary", pa.string()), ("adds_answer", pa.bool_())])
"""`Edit`: how much a fix or a corruption changed its step."""
FLIP_PROOF = pa.struct([
    ("flips", pa.int64()), ("trials", pa.int64()), ("control_flips", pa.int64()), ("control_trials", pa.int64()),
    ("controls_replayed", pa.list_(pa.string())), ("controls_proven_identical", pa.int64()),
    ("proven_identical_because", pa.string()), ("repeat_replays", pa.list_(pa.string())), ("difference", pa.float64()),
    ("interval", pa.list_(pa.float64())), ("confidence", pa.float64())])
"""`FlipProof`: the flip's replays against its controls."""
SEARCH_STATS = pa.struct([
    ("replays", pa.int64()), ("control_replays", pa.int64()), ("analyzer_calls", pa.int64()), ("live_calls", pa.int64()),
    ("tokens", pa.int64()), ("seconds", pa.float64()), ("cut_by", pa.string()), ("cut_reason", pa.string()),
    ("cut_stopped", pa.string())])
"""`SearchStats`: what a search did and the limit that cut it."""

LABEL_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("steps", pa.list_(pa.int32())),
    ("confidence", pa.float64()),
    ("flip_check", FLIP_PROOF),
    ("proof_replay_id", pa.string()),
    ("edit", EDIT),
    ("earliest", pa.string()),
    ("answer_leaks", pa.int64()),
    ("fixed_turn", pa.int64()),
    ("search_stats", SEARCH_STATS),
    ("recheck_of", pa.string()),
    ("recheck_agrees", pa.bool_()),
]
"""What a search established, as typed columns (`Annotation`'s fields of the same names). A row written
before they existed has `steps` NULL (a newer row's is a list, empty for no label) and kept them in
`metadata`: the `annotations` view reads them from there (`LEGACY_ANNOTATION_COLUMNS`)."""


def duck_type(arrow: pa.DataType) -> str:
    """The DuckDB type of an Arrow type of the schemas (scalars, lists, structs)."""
    scalars = {pa.string(): "VARCHAR", pa.bool_(): "BOOLEAN", pa.float64(): "DOUBLE", pa.int64(): "BIGINT",
               pa.int32(): "INTEGER", pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ"}
    if arrow in scalars:
        return scalars[arrow]
    if pa.types.is_list(arrow):
        return f"{duck_type(arrow.value_type)}[]"
    if pa.types.is_struct(arrow):
        return "STRUCT(" + ", ".join(f"{f.name} {duck_type(f.type)}" for f in arrow) + ")"
    raise TypeError(f"no DuckDB type for {arrow}")


def _legacy(path: str, arrow: pa.DataType) -> str:
    if pa.types.is_list(arrow) or pa.types.is_struct(arrow):
        return f"TRY_CAST(json_extract(metadata, '$.{path}') AS {duck_type(arrow)})"
    return _meta(path, None if arrow == pa.string() else duck_type(arrow))


LEGACY_ANNOTATION_COLUMNS: dict[str, str] = {name: _legacy(name, arrow) for name, arrow in LABEL_COLUMNS}
"""Where an annotation row written before `LABEL_COLUMNS` existed kept each of them (SQL over `metadata`)."""
LEGACY_ANNOTATION_KEYS = tuple(name for name, _ in LABEL_COLUMNS) + ("multi_step",)
"""The keys of such a row's `metadata` that are typed fields now (dropped from `metadata` when read)."""


SCHEMAS: dict[str, pa.Schema] = {
    "runs": pa.schema(
        [
            ("id", pa.string()),
            ("batch_id", pa.string()),
            ("task_id", pa.string()),
            ("question", pa.string()),
            ("ground_truth", pa.string()),
            ("final_answer", pa.string()),
            ("success", pa.bool_()),
            ("score", pa.float64()),
            ("verdict_details", pa.string()),
            ("model", pa.string()),
            ("config_hash", pa.string()),
            ("source", pa.string()),
            ("parent_run_id", pa.string()),
            ("started_at", TS),
            ("duration_s", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("n_steps", pa.int32()),
            ("agents", pa.list_(pa.string())),
            *RECORDING_COLUMNS,
            *REPLAY_COLUMNS,
            ("metadata", pa.string()),
        ]
    ),
    "steps": pa.schema(
        [
            ("id", pa.string()),
            ("run_id", pa.string()),
            ("batch_id", pa.string()),
            ("step", pa.int32()),
            ("agent", pa.string()),
            ("kind", pa.string()),
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.string()),
            ("observation", pa.string()),
            ("call_ids", pa.list_(pa.string())),
            ("started_at", TS),
            ("metadata", pa.string()),
        ]
    ),
    "llm_calls": pa.schema(
        [
            ("id", pa.string()),
            ("run_id", pa.string()),
            ("agent", pa.string()),
            ("request_hash", pa.string()),
            ("counter", pa.int32()),
            ("model", pa.string()),
            ("provider", pa.string()),
            ("mode", pa.string()),
            ("simulated", pa.bool_()),
            ("purpose", pa.string()),
            ("step_index", pa.int32()),
            ("request", pa.string()),
            ("response", pa.string()),
            ("latency_s", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("error", pa.string()),
            ("created_at", TS),
        ]
    ),
    "replays": pa.schema(
        [
            ("id", pa.string()),
            ("run_id", pa.string()),
            ("purpose", pa.string()),
            ("intervention_step", pa.int32()),
            ("intervention_kind", pa.string()),
            ("intervention_agent", pa.string()),
            ("intervention_content", pa.string()),
            ("intervention_tool_calls", pa.string()),
            ("intervention_persist", pa.string()),
            ("intervention_also", pa.string()),
            ("result_run_id", pa.string()),
            ("success_before", pa.bool_()),
            ("success_after", pa.bool_()),
            ("flipped", pa.bool_()),
            ("live_calls", pa.int64()),
            ("replayed_calls", pa.int64()),
            ("tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("duration_s", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("divergence", pa.string()),
            ("error", pa.string()),
            ("created_at", TS),
        ]
    ),
    "annotations": pa.schema(
        [
            ("id", pa.string()),
            ("run_id", pa.string()),
            ("method", pa.string()),
            ("agent", pa.string()),
            ("step", pa.int32()),
            ("verified", pa.bool_()),
            ("status", pa.string()),
            ("annotator", pa.string()),
            ("reason", pa.string()),
            ("fix", pa.string()),
            ("corruption", pa.string()),
            ("replay_ids", pa.list_(pa.string())),
            ("notes", pa.list_(pa.string())),
            ("cost_llm_calls", pa.int64()),
            ("cost_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("cost_seconds", pa.float64()),
            ("cost_replays", pa.int64()),
            ("cost_replayed_calls", pa.int64()),
            ("cost_prompt_tokens", pa.int64()),
            ("cost_completion_tokens", pa.int64()),
            ("created_at", TS),
            ("transcript", pa.string()),
            ("transcript_run_id", pa.string()),
            *LABEL_COLUMNS,
            ("metadata", pa.string()),
        ]
    ),
}

TABLES = tuple(SCHEMAS)


def _attrs(model: Any, *names: str, prefix: str = "") -> dict[str, Any]:
    """`{prefix + name: model.name}` for each name; all None when there is no model."""
    return {prefix + n: None if model is None else getattr(model, n) for n in names}


def recording_values(t: Trajectory) -> dict[str, Any]:
    """The recording and replay columns of a run row (NULL where the run has none)."""
    rec, rpl = t.recording, t.replay
    i = None if rpl is None else rpl.intervention
    return {
        **_attrs(rec, "gateway_run_id", "image", "framework_version"),
        "task": None if rec is None else rec.task.model_dump_json(),
        "agent_models": None if rec is None else _json(rec.agent_models),
        **_attrs(None if rec is None else rec.system, "file", "name", "digest", prefix="system_"),
        **_attrs(rpl, "of_gateway_run_id", "live_calls", "replayed_calls", "forced_calls", "divergence",
                 "prefix_identical", "identical", prefix="replay_"),
        **_attrs(i, "step", "kind", prefix="replay_"),
        "replay_intervention": None if i is None else i.model_dump_json(),
    }


def _typed(run: dict[str, Any], column: str, build: Any) -> Any:
    """`build()` of one run's column(s); a bad value is a WarehouseError naming the run and the column."""
    try:
        return build()
    except (ValidationError, ValueError, TypeError) as exc:
        raise WarehouseError(f"runs: run {run.get('id')}: column {column!r}: {exc}") from exc


def recording_from_row(run: dict[str, Any]) -> Recording | None:
    """The run's `Recording` (None when `gateway_run_id` is NULL: an imported run)."""
    if run.get("gateway_run_id") is None:
        return None
    if run.get("task") is None:
        raise WarehouseError(f"runs: run {run.get('id')}: column 'task' is NULL but 'gateway_run_id' is "
                             f"{run['gateway_run_id']!r}: a recording needs the task it ran")
    task = _typed(run, "task", lambda: Task.model_validate_json(run["task"]))
    agent_models = _typed(run, "agent_models", lambda: _unjson(run.get("agent_models")) or {})
    system = None
    if run.get("system_file") is not None:
        system = _typed(run, "system_file", lambda: SystemRef(file=run["system_file"], name=run.get("system_name") or "",
                                                              digest=run.get("system_digest") or ""))
    return _typed(run, "agent_models", lambda: Recording(
        gateway_run_id=run["gateway_run_id"], task=task, agent_models=agent_models, image=run.get("image"),
        framework_version=run.get("framework_version"), system=system))


def replay_provenance_from_row(run: dict[str, Any]) -> ReplayProvenance | None:
    """The run's `ReplayProvenance` (None when `replay_of_gateway_run_id` is NULL: not a replay)."""
    if run.get("replay_of_gateway_run_id") is None:
        return None
    intervention = _typed(run, "replay_intervention", lambda: None if run.get("replay_intervention") is None
                          else Intervention.model_validate_json(run["replay_intervention"]))
    return ReplayProvenance(
        of_gateway_run_id=run["replay_of_gateway_run_id"], intervention=intervention,
        live_calls=run.get("replay_live_calls") or 0, replayed_calls=run.get("replay_replayed_calls") or 0,
        forced_calls=run.get("replay_forced_calls") or 0, divergence=run.get("replay_divergence"),
        prefix_identical=bool(run.get("replay_prefix_identical")), identical=bool(run.get("replay_identical")))


def run_row(t: Trajectory, batch_id: str) -> dict[str, Any]:
    v = t.verdict
    return {
        "id": t.id,
        "framework": t.framework,
        "benchmark": t.benchmark,
        "batch_id": batch_id,
        "task_id": t.task_id,
        "question": t.question,
        "ground_truth": t.ground_truth,
        "final_answer": t.final_answer,
        "success": None if v is None else v.success,
        "score": None if v is None else v.score,
        "verdict_details": None if v is None else _json(v.details),
        "model": t.model,
        "config_hash": t.config_hash,
        "source": t.source,
        "parent_run_id": t.parent_run_id,
        "started_at": t.started_at,
        "duration_s": t.duration_s,
        "prompt_tokens": t.prompt_tokens,
        "completion_tokens": t.completion_tokens,
        "cost_usd": t.cost_usd,
        "n_steps": len(t.steps),
        "agents": t.agents,
        **recording_values(t),
        "metadata": _json(t.metadata),
    }


def step_rows(t: Trajectory, run_id: str, batch_id: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{run_id}:{s.index}",
            "framework": t.framework,
            "benchmark": t.benchmark,
            "run_id": run_id,
            "batch_id": batch_id,
            "step": s.index,
            "agent": s.agent,
            "kind": s.kind,
            "role": s.role,
            "content": s.content,
            "tool_calls": _json(s.tool_calls),
            "observation": s.observation,
            "call_ids": s.call_ids,
            "started_at": s.started_at,
            "metadata": _json(s.metadata),
        }
        for s in t.steps
    ]


def trajectory_from_rows(run: dict[str, Any], steps: list[dict[str, Any]]) -> Trajectory:
    verdict = None
    if run.get("success") is not None:
        verdict = Verdict(
            success=run["success"], score=run["score"] or 0.0, details=_unjson(run["verdict_details"]) or {}
        )
    recording = recording_from_row(run)
    metadata = _unjson(run["metadata"]) or {}
    if recording is not None:  # a run written before the recording columns: its keys are typed fields now
        metadata = {k: v for k, v in metadata.items() if k not in LEGACY_METADATA_KEYS}
    return Trajectory(
        framework=run["framework"],
        benchmark=run["benchmark"],
        task_id=run["task_id"],
        question=run["question"] or "",
        ground_truth=run["ground_truth"],
        final_answer=run["final_answer"],
        verdict=verdict,
        model=run["model"],
        config_hash=run["config_hash"],
        source=run["source"],
        parent_run_id=run["parent_run_id"],
        started_at=run["started_at"],
        duration_s=run["duration_s"],
        prompt_tokens=run["prompt_tokens"] or 0,
        completion_tokens=run["completion_tokens"] or 0,
        cost_usd=run["cost_usd"] or 0.0,
        recording=recording,
        replay=replay_provenance_from_row(run),
        metadata=metadata,
        steps=[
            Step(
                index=s["step"],
                agent=s["agent"],
                kind=s["kind"],
                role=s["role"],
                content=s["content"] or "",
                tool_calls=_unjson(s["tool_calls"]) or [],
                observation=s["observation"],
                call_ids=list(s["call_ids"] or []),
                started_at=s["started_at"],
                metadata=_unjson(s["metadata"]) or {},
            )
            for s in sorted(steps, key=lambda s: s["step"])
        ],
    )


def llm_call_row(c: LLMCall) -> dict[str, Any]:
    row = c.model_dump(mode="python")
    row["id"] = c.id
    row["request"] = _json(c.request)
    row["response"] = _json(c.response)
    return row


def llm_call_from_row(row: dict[str, Any]) -> LLMCall:
    data = {k: v for k, v in row.items() if k != "id"}
    data["request"] = _unjson(row["request"]) or {}
    data["response"] = _unjson(row["response"]) or {}
    return LLMCall(**data)


def replay_row(r: Replay) -> dict[str, Any]:
    i = r.intervention
    return {
        "id": r.id,
        "framework": r.framework,
        "benchmark": r.benchmark,
        "run_id": r.run_id,
        "purpose": r.purpose,
        "intervention_step": None if i is None else i.step,
        "intervention_kind": None if i is None else i.kind,
        "intervention_agent": None if i is None else i.agent,
        "intervention_content": None if i is None else i.new_content,
        "intervention_tool_calls": None if i is None else _json(i.tool_calls),
        "intervention_persist": None if i is None else i.persist,
        "intervention_also": None if i is None or not i.also else _json([x.model_dump(mode="json") for x in i.also]),
        "result_run_id": r.result_run_id,
        "success_before": r.success_before,
        "success_after": r.success_after,
        "flipped": r.flipped,
        "live_calls": r.cost.llm_calls,
        "replayed_calls": r.cost.replayed_calls,
        "tokens": r.cost.tokens,
        "cost_usd": r.cost.usd,
        "duration_s": r.cost.seconds,
        "prompt_tokens": r.cost.prompt_tokens,
        "completion_tokens": r.cost.completion_tokens,
        "divergence": r.divergence,
        "error": r.error,
        "created_at": r.created_at,
    }


def replay_from_row(row: dict[str, Any]) -> Replay:
    intervention = None
    if row["intervention_step"] is not None:
        intervention = Intervention(
            run_id=row["run_id"],
            step=row["intervention_step"],
            new_content=row["intervention_content"] or "",
            kind=row["intervention_kind"],
            agent=row["intervention_agent"],
            tool_calls=_unjson(row["intervention_tool_calls"]),
            persist=row.get("intervention_persist"),
            also=[Intervention.model_validate(x) for x in (_unjson(row.get("intervention_also")) or [])],
        )
    cost = Usage(llm_calls=row["live_calls"] or 0, replayed_calls=row["replayed_calls"] or 0, usd=row["cost_usd"] or 0.0,
                 seconds=row["duration_s"] or 0.0, replays=1,
                 **_tokens(row["tokens"], row.get("prompt_tokens"), row.get("completion_tokens")))
    fields = set(Replay.model_fields) - {"intervention", "cost"}
    return Replay(intervention=intervention, cost=cost, **{k: row[k] for k in fields if k in row})


def _tokens(total: int | None, prompt: int | None, completion: int | None) -> dict[str, int]:
    """A row's token split; a row written before the split was stored (rootstep before 2026-11-25) has only
    the total, read as prompt tokens: the total stays right."""
    if prompt is None and completion is None:
        return {"prompt_tokens": total or 0, "completion_tokens": 0}
    return {"prompt_tokens": prompt or 0, "completion_tokens": completion or 0}


def annotation_row(a: Annotation) -> dict[str, Any]:
    return {
        "id": a.id,
        "framework": a.framework,
        "benchmark": a.benchmark,
        "run_id": a.run_id,
        "method": a.method,
        "agent": a.agent,
        "step": a.step,
        "verified": a.verified,
        "status": a.status,
        "annotator": a.annotator,
        "reason": a.evidence.reason,
        "fix": a.evidence.fix,
        "corruption": a.evidence.corruption,
        "replay_ids": a.evidence.replay_ids,
        "notes": a.evidence.notes,
        "cost_llm_calls": a.cost.llm_calls,
        "cost_tokens": a.cost.tokens,
        "cost_usd": a.cost.usd,
        "cost_seconds": a.cost.seconds,
        "cost_replays": a.cost.replays,
        "cost_replayed_calls": a.cost.replayed_calls,
        "cost_prompt_tokens": a.cost.prompt_tokens,
        "cost_completion_tokens": a.cost.completion_tokens,
        "created_at": a.created_at,
        "transcript": _json([x.model_dump(mode="json") for x in a.evidence.transcript]),
        "transcript_run_id": a.evidence.transcript_run_id,
        **a.model_dump(include={name for name, _ in LABEL_COLUMNS}),
        "metadata": _json(a.metadata),
    }


def annotation_from_row(row: dict[str, Any]) -> Annotation:
    return Annotation(
        run_id=row["run_id"],
        framework=row["framework"],
        benchmark=row["benchmark"],
        method=row["method"],
        agent=row["agent"],
        step=row["step"],
        verified=row["verified"],
        status=row["status"],
        annotator=row["annotator"] or "",
        evidence=Evidence(
            reason=row["reason"],
            fix=row["fix"],
            corruption=row["corruption"],
            replay_ids=list(row["replay_ids"] or []),
            notes=list(row["notes"] or []),
            transcript=[Asked.model_validate(x) for x in _unjson(row.get("transcript")) or []],
            transcript_run_id=row.get("transcript_run_id"),
        ),
        cost=Usage(
            llm_calls=row["cost_llm_calls"] or 0,
            replayed_calls=row.get("cost_replayed_calls") or 0,
            usd=row["cost_usd"] or 0.0,
            seconds=row["cost_seconds"] or 0.0,
            replays=row["cost_replays"] or 0,
            **_tokens(row["cost_tokens"], row.get("cost_prompt_tokens"), row.get("cost_completion_tokens")),
        ),
        created_at=row["created_at"],
        **{name: value for name, _ in LABEL_COLUMNS if (value := _present(row.get(name))) is not None},
        metadata={k: v for k, v in (_unjson(row["metadata"]) or {}).items() if k not in LEGACY_ANNOTATION_KEYS},
    )


def _present(value: Any) -> Any:
    """A label column's value as the model takes it: None for NULL or a struct whose members are all NULL (the
    field keeps its default), a struct without its NULL members (their defaults apply)."""
    if not isinstance(value, dict):
        return value
    members = {k: v for k, v in value.items() if v is not None}
    return members or None
