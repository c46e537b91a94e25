"""Inspect AI eval logs (`.eval` or `.json`), read with `inspect_ai.log` (the optional extra `inspect`).

One trajectory per sample and epoch, read with its attachments resolved (Inspect's `.eval` writer keeps a
long text once, as `attachment://<hash>`). A step per `model` event (agent step: the output message's text
and tool calls) and per `tool` event (tool step: the result, or the error), in event order; the agent is
the nearest enclosing span of type `agent` (`react(name=...)`, a handoff's agent), else the nearest
enclosing `solver` span (the plan's solver the event ran in), else the plan's first solver.
The outcome is the sample's score: `value_to_float` of the first scorer's value is 1.0 for a success, so
failed samples are found without a flag; a sample that errored is a failure. The benchmark is the task's
name, the ground truth the sample's target, the final answer the sample's output.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from rootstep.model import InputError, RootstepError, Trajectory, Verdict
from ._build import SourceStep, build_trajectory, question_text, text_of, tool_call

EXTRA_HINT = "pip install -c requirements.lock -e '.[inspect]'"


def require_inspect() -> Any:
    try:
        import inspect_ai.log as log
    except ImportError:
        raise RootstepError(f"reading Inspect AI logs needs the optional extra `inspect` (inspect_ai): {EXTRA_HINT}") from None
    return log


def is_inspect(path: Path, data: Any) -> tuple[bool, str]:
    if path.suffix == ".eval":
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                if "header.json" in z.namelist() or any(n.startswith("samples/") for n in z.namelist()):
                    return True, "an .eval archive"
        return False, "an .eval file that is not an Inspect log archive (no header.json)"
    if isinstance(data, dict) and isinstance(data.get("eval"), dict) and "task" in data["eval"]:
        return True, "a JSON eval log (eval.task)"
    return False, "not an Inspect log (no .eval archive, no `eval.task` in JSON)"


def _spans(events: list[Any]) -> dict[str, tuple[str | None, str | None, str | None]]:
    """span id -> (parent id, type, name)."""
    return {e.id: (e.parent_id, e.type, e.name) for e in events if getattr(e, "event", None) == "span_begin"}


def _agent(span_id: str | None, spans: dict[str, tuple[str | None, str | None, str | None]], default: str) -> str:
    seen, solver = set(), None
    while span_id and span_id in spans and span_id not in seen:
        seen.add(span_id)
        parent, kind, name = spans[span_id]
        if kind == "agent" and name:
            return name
        if kind == "solver" and name and solver is None:
            solver = name
        span_id = parent
    return solver or default


def _verdict(sample: Any) -> Verdict | None:
    from inspect_ai.scorer import value_to_float

    if sample.error is not None:
        return Verdict(success=False, details={"source": "inspect sample error", "error": str(sample.error.message)[:500]})
    if not sample.scores:
        return None
    name, score = next(iter(sample.scores.items()))
    value = value_to_float()(score.value)
    return Verdict(success=value >= 1.0, score=value,
                   details={"source": "inspect score", "scorer": name, "value": score.value, "answer": score.answer})


def load(path: Path, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    log_api = require_inspect()
    try:
        log = log_api.read_eval_log(str(path), resolve_attachments=True)
    except Exception as exc:  # inspect_ai raises its own and pydantic's errors on a broken log
        raise InputError(file, "<eval log>", f"inspect_ai could not read it: {type(exc).__name__}: {str(exc)[:300]}") from None
    if not log.samples:
        raise InputError(file, "samples", "the log holds no sample (written with --no-log-samples?)")
    solver = log.plan.steps[0].solver if log.plan and log.plan.steps else "agent"
    out = []
    for sample in log.samples:
        spans = _spans(sample.events)
        steps = []
        for e in sample.events:
            kind = getattr(e, "event", None)
            where = f"sample {sample.id} epoch {sample.epoch}: event {getattr(e, 'uuid', None)}"
            if kind == "model":
                if e.output is None or not e.output.choices:
                    raise InputError(file, f"{where}: output.choices", "missing: a model event without an output")
                message = e.output.message
                calls = [tool_call(c.function, c.arguments, c.id) for c in message.tool_calls or []]
                steps.append(SourceStep(agent=_agent(e.span_id, spans, solver), kind="agent", content=message.text or "",
                                        source_id=e.uuid, tool_calls=calls, started_at=e.timestamp, role="assistant",
                                        extra={"model": e.model, "span_id": e.span_id,
                                               **({"usage": e.output.usage.model_dump(exclude_none=True)} if e.output.usage else {})}))
            elif kind == "tool":
                result = text_of(e.result) if e.error is None else f"Error: {e.error.message}"
                steps.append(SourceStep(agent=_agent(e.span_id, spans, solver), kind="tool", content=result, source_id=e.uuid,
                                        tool_calls=[tool_call(e.function, e.arguments, e.id)], started_at=e.timestamp,
                                        extra={"span_id": e.span_id, **({"handoff_to": e.agent} if e.agent else {})}))
        target = sample.target if isinstance(sample.target, str) else " | ".join(sample.target)
        usage = sample.model_usage or {}
        out.append(build_trajectory(
            file, "inspect", steps,
            trace={"trace_id": f"{log.eval.eval_id}/{sample.id}/{sample.epoch}", "eval_id": log.eval.eval_id,
                   "run_id": log.eval.run_id, "sample_id": str(sample.id), "epoch": sample.epoch, "sample_uuid": sample.uuid},
            framework=framework or "inspect", benchmark=benchmark or log.eval.task,
            task_id=str(sample.id) if sample.epoch == 1 else f"{sample.id}#{sample.epoch}",
            question=question_text(sample.input if isinstance(sample.input, str) else [m.text for m in sample.input]),
            ground_truth=target, final_answer=sample.output.completion if sample.output else None,
            verdict=_verdict(sample), model=log.eval.model,
            started_at=steps[0].started_at if steps else None, duration_s=sample.total_time,
            prompt_tokens=sum(u.input_tokens for u in usage.values()),
            completion_tokens=sum(u.output_tokens for u in usage.values()),
            cost_usd=sum(u.total_cost or 0.0 for u in usage.values()),
        ))
    return out
