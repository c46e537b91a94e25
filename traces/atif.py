"""ATIF (Harbor's Agent Trajectory Interchange Format, RFC 0001, v1.0-v1.8), in and out.

In: one trajectory per file (a root `Trajectory` object). `user` steps are human steps, `system` steps
environment steps, `agent` steps agent steps (message, tool calls, the observation's results as the
step's observation; `metrics` -- tokens, `cost_usd` -- kept in the step's metadata, the run's cost is
`final_metrics.total_cost_usd` or the steps' sum). A subagent trajectory an observation references
(`subagent_trajectory_ref`) is placed right after that step, its steps under the subagent's `agent.name`:
embedded (`subagent_trajectories`, v1.7), else read from its `trajectory_path` beside the file (the
followed files are listed in `metadata.trace.subagent_files`, so a folder import does not store them
again as runs of their own); a reference found in neither is a warning of the import, not a silent gap.
The source id of a step is `<trajectory_id or session_id>#<step_id>`. A step's agent is `extra.agent`
when set (what rootstep writes for multi-agent runs), else its trajectory's `agent.name`. Observation
results marked `extra.rootstep_step` (rootstep's own export) come back as the tool steps they were.

Out (`to_atif`): a rootstep trajectory as an ATIF-v1.7 object; tool steps become observation results of
the agent step that called them; each step keeps its agent in `extra.agent`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rootstep.model import Annotation, InputError, StepKind, Trajectory
from ._build import SourceStep, build_trajectory, from_iso, said, text_of, tool_call

SCHEMA_VERSION = "ATIF-v1.7"


_KINDS: dict[str, StepKind] = {"system": "environment", "user": "human", "agent": "agent"}
"""An ATIF step's `source` as the kind of step it is."""


def is_atif(data: Any) -> tuple[bool, str]:
    if isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF-") and isinstance(data.get("steps"), list):
        return True, f"schema_version {data['schema_version']}"
    return False, "no `schema_version: ATIF-v1.x` with a `steps` list"


class _Reading:
    """What one ATIF import reads besides the root: embedded subagents, sibling files, notes on what is absent."""

    def __init__(self, file: str, embedded: dict[str, Any]) -> None:
        self.file, self.embedded = file, embedded
        self.followed: list[str] = []
        self.notes: list[str] = []

    def subagent(self, ref: dict[str, Any], where: str) -> tuple[dict[str, Any] | None, str]:
        """The trajectory a `subagent_trajectory_ref` names: embedded (v1.7), else its `trajectory_path` beside the file."""
        ident = str(ref.get("trajectory_id") or ref.get("session_id") or "")
        if ident in self.embedded:
            return self.embedded[ident], ident
        relative = ref.get("trajectory_path")
        if not relative:
            self.notes.append(f"subagent trajectory {ident} (referenced at {where}) is not embedded and has no trajectory_path: its steps are absent")
            return None, ident
        sibling = (Path(self.file).parent / str(relative)).resolve()
        if not sibling.is_file():
            self.notes.append(f"subagent trajectory {ident} (referenced at {where}) is not embedded and {relative} is not beside the file: its steps are absent")
            return None, ident
        try:
            data = json.loads(sibling.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(str(sibling), "<json>", f"the subagent trajectory referenced at {where} cannot be read: {exc}") from None
        ok, why = is_atif(data)
        if not ok:
            raise InputError(str(sibling), "<format>", f"the subagent trajectory referenced at {where} is not ATIF: {why}")
        self.followed.append(str(sibling))
        return data, ident


def _steps(trajectory: dict[str, Any], where: str, out: list[SourceStep], reading: _Reading, depth: int = 0) -> None:
    file = reading.file
    name = str((trajectory.get("agent") or {}).get("name") or "agent")
    ident = trajectory.get("trajectory_id") or trajectory.get("session_id") or name
    if not isinstance(trajectory.get("steps"), list):
        raise InputError(file, f"{where}.steps", "missing or not a list")
    for i, step in enumerate(trajectory["steps"]):
        path = f"{where}.steps[{i}]"
        if not isinstance(step, dict):
            raise InputError(file, path, "expected a step object")
        if step.get("source") not in ("system", "user", "agent"):
            raise InputError(file, f"{path}.source", f"{step.get('source')!r} is not one of system, user, agent")
        if "step_id" not in step:
            raise InputError(file, f"{path}.step_id", "missing")
        calls = []
        for c_i, call in enumerate(step.get("tool_calls") or []):
            if not isinstance(call, dict) or "function_name" not in call:
                raise InputError(file, f"{path}.tool_calls[{c_i}].function_name", "missing")
            calls.append(tool_call(str(call["function_name"]), call.get("arguments", {}), call.get("tool_call_id")))
        results = ((step.get("observation") or {}).get("results") or []) if isinstance(step.get("observation"), dict) else []
        results = [r for r in results if isinstance(r, dict)]
        # rootstep's own export keeps each tool step as a result marked `extra.rootstep_step`: they come back as steps
        tool_results = [r for r in results if isinstance(r.get("extra"), dict) and "rootstep_step" in r["extra"]]
        observation = "\n".join(text_of(r.get("content")) for r in results if r.get("content") and r not in tool_results) or None
        extra = step.get("extra") or {}
        kind = _KINDS[step["source"]]
        details: dict[str, Any] = {"atif_step_id": step["step_id"], "atif_trajectory": ident}
        if isinstance(step.get("metrics"), dict) and step["metrics"]:
            details["usage"] = step["metrics"]  # prompt/completion tokens, cost_usd as the source counted them
        agent = str(extra.get("agent") or (name if kind == "agent" else step["source"]))
        out.append(SourceStep(
            agent=agent, kind=kind, content=text_of(step.get("message")), source_id=f"{ident}#{step['step_id']}",
            tool_calls=calls, observation=observation, started_at=from_iso(step.get("timestamp")), role=step["source"],
            extra=details,
        ))
        for r_i, r in enumerate(tool_results):
            call = next((c for c in calls if c.get("id") == r.get("source_call_id")), None)
            out.append(SourceStep(
                agent=str(r["extra"].get("agent") or agent), kind="tool", content=text_of(r.get("content")),
                source_id=f"{ident}#{step['step_id']}.{r_i + 1}", tool_calls=[call] if call else [],
                started_at=from_iso(step.get("timestamp")), extra={"atif_step_id": step["step_id"], "atif_trajectory": ident},
            ))
        for r in results:
            for ref in r.get("subagent_trajectory_ref") or []:
                if not isinstance(ref, dict):
                    continue
                sub, sub_id = reading.subagent(ref, f"{ident} step {step['step_id']}")
                if sub is not None:
                    if depth > 20:
                        raise InputError(file, f"subagent {sub_id}", "subagent references nest deeper than 20 (a cycle?)")
                    _steps(sub, f"subagent {sub_id}", out, reading, depth + 1)


def _cost(data: dict[str, Any], steps: list[SourceStep]) -> float:
    """The run's cost: the root's `final_metrics.total_cost_usd`, else the steps' `metrics.cost_usd` summed."""
    total = (data.get("final_metrics") or {}).get("total_cost_usd")
    if isinstance(total, (int, float)):
        return float(total)
    return float(sum((s.extra.get("usage") or {}).get("cost_usd") or 0.0 for s in steps))


def load(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    if not isinstance(data, dict):
        raise InputError(file, "<root>", "expected an ATIF trajectory object")
    embedded = {str(s.get("trajectory_id") or s.get("session_id")): s for s in data.get("subagent_trajectories") or []
                if isinstance(s, dict)}
    reading = _Reading(file, embedded)
    steps: list[SourceStep] = []
    _steps(data, "<root>", steps, reading)
    extra = data.get("extra") or {}
    metrics = data.get("final_metrics") or {}
    agent = data.get("agent") or {}
    trace = {"trace_id": data.get("session_id"), "session_id": data.get("session_id"),
             "trajectory_id": data.get("trajectory_id"), "schema_version": data.get("schema_version")}
    if reading.followed:
        trace["subagent_files"] = reading.followed
    return [build_trajectory(
        file, "atif", steps, trace=trace,
        framework=framework or str(extra.get("framework") or "atif"), benchmark=benchmark or str(extra.get("benchmark") or "imported-traces"),
        task_id=str(extra.get("task_id") or data.get("session_id") or data.get("trajectory_id") or "trajectory"),
        question=str(extra.get("question") or next((s.content for s in steps if s.kind == "human"), "")),
        ground_truth=extra.get("ground_truth"), final_answer=extra.get("final_answer") or next(
            (s.content for s in reversed(steps) if s.kind == "agent" and s.content and s.agent == str(agent.get("name"))),
            next((s.content for s in reversed(steps) if s.kind == "agent" and s.content), None)),
        model=agent.get("model_name"), started_at=steps[0].started_at if steps else None,
        prompt_tokens=int(metrics.get("total_prompt_tokens") or 0), completion_tokens=int(metrics.get("total_completion_tokens") or 0),
        cost_usd=_cost(data, steps), notes=reading.notes,
    )]


def to_atif(run_id: str, trajectory: Trajectory, verdict: Annotation | None = None) -> dict[str, Any]:
    """An ATIF-v1.7 trajectory of a rootstep run (with the verdict in `extra.rootstep_verdict` when given)."""
    steps: list[dict[str, Any]] = []
    last_agent: dict[str, Any] | None = None
    for s in trajectory.steps:
        stamp = s.started_at.isoformat() if s.started_at else None
        if s.kind == "tool" and last_agent is not None:
            calls = last_agent.get("tool_calls") or []
            wanted = s.tool_calls[0] if s.tool_calls else {}
            match = next((c for c in calls if c["tool_call_id"] == wanted.get("id") or c["function_name"] == wanted.get("name")), None)
            results = last_agent.setdefault("observation", {"results": []})["results"]
            results.append({"source_call_id": None if match is None else match["tool_call_id"], "content": s.content,
                            "extra": {"rootstep_step": s.index, "agent": s.agent}})
            continue
        source = {"agent": "agent", "human": "user"}.get(s.kind, "system")
        message = said(s.content, s.tool_calls) if source == "agent" else s.content
        step: dict[str, Any] = {"step_id": len(steps) + 1, "source": source, "message": message,
                                "extra": {"agent": s.agent, "rootstep_step": s.index}}
        if stamp:
            step["timestamp"] = stamp
        if source == "agent" and s.tool_calls:
            step["tool_calls"] = [{"tool_call_id": str(c.get("id") or f"call-{s.index}-{i}"), "function_name": str(c.get("name", "")),
                                   "arguments": c.get("arguments") if isinstance(c.get("arguments"), dict) else {"value": c.get("arguments")}}
                                  for i, c in enumerate(s.tool_calls)]
        if s.observation:
            step["observation"] = {"results": [{"content": s.observation}]}
        if verdict is not None and verdict.step == s.index:
            step["extra"]["rootstep_verdict"] = {"decisive": True, "agent": verdict.agent, "reason": verdict.evidence.reason}
        steps.append(step)
        last_agent = step if source == "agent" else None
    extra: dict[str, Any] = {"framework": trajectory.framework, "benchmark": trajectory.benchmark, "task_id": trajectory.task_id,
             "question": trajectory.question, "ground_truth": trajectory.ground_truth, "final_answer": trajectory.final_answer,
             "rootstep_run_id": run_id}
    if verdict is not None:
        extra["rootstep_verdict"] = {"agent": verdict.agent, "step": verdict.step, "reason": verdict.evidence.reason,
                                     "method": verdict.method, "annotator": verdict.annotator, "verified": verdict.verified}
    trace = trajectory.metadata.get("trace") or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": str(trace.get("session_id") or trace.get("trace_id") or run_id),
        "agent": {"name": trajectory.framework, "version": "rootstep", **({"model_name": trajectory.model} if trajectory.model else {})},
        "steps": steps,
        "final_metrics": {"total_prompt_tokens": trajectory.prompt_tokens, "total_completion_tokens": trajectory.completion_tokens,
                          "total_steps": len(steps), **({"total_cost_usd": trajectory.cost_usd} if trajectory.cost_usd else {})},
        "extra": {k: v for k, v in extra.items() if v is not None},
    }
