"""LangSmith runs: a run export, or the SDK's own ingestion payloads (`post` / `patch` batches).

Accepted shapes: runs (`langsmith.schemas.Run`) as a JSON array, JSON Lines or `{"runs": [...]}` (a run
tree's `child_runs` are followed); the bodies the LangSmith client sends to `/runs/batch` --
`{"post": [...], "patch": [...]}`, one per line or as a list -- whose runs are merged by `id` in the order
sent (a patch's `end_time`, `outputs`, `error` complete its post; an empty value never overwrites a full one).

One trajectory per `trace_id`; runs in `dotted_order` (LangSmith's own total order of a run tree); a step
per `llm` run (agent step: its message's text and tool calls, whichever shape the integration stored:
LangChain's `LLMResult` with `additional_kwargs`, a ChatCompletion, the Responses API's `output` items) and
per `tool` run (tool step: the tool's output). The agent is the LangGraph agent of the run's metadata
(the top-level node of `langgraph_checkpoint_ns`, else `langgraph_node`), else the nearest enclosing
OpenAI Agents SDK agent run (a chain carrying `invocation_params.handoffs`), else the nearest enclosing
chain below the root, else the run's name. A root run with an `error` is a failure. Tokens and costs are
the llm runs' (`prompt_tokens` / `usage_metadata`, `total_cost`).
"""

from __future__ import annotations

from typing import Any

from rootstep.model import InputError, Trajectory, Verdict
from ._build import (SourceStep, build_trajectory, from_iso, group, langgraph_agent, question_text, seconds_between,
                     tool_call)
from ._messages import first_user_text, read_message


def _is_batch(item: Any) -> bool:
    return isinstance(item, dict) and bool({"post", "patch"} & set(item)) and \
        all(isinstance(item.get(k, []), list) for k in ("post", "patch"))


def _flatten(runs: list[Any]) -> list[Any]:
    out = []
    for run in runs:
        out.append(run)
        if isinstance(run, dict) and isinstance(run.get("child_runs"), list):
            out += _flatten(run["child_runs"])
    return out


def _merge(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of `/runs/batch` bodies merged by id, in the order first posted."""
    runs: dict[str, dict[str, Any]] = {}
    for batch in batches:
        for kind in ("post", "patch"):
            for run in batch.get(kind) or []:
                if not isinstance(run, dict) or not isinstance(run.get("id"), str):
                    continue
                base = runs.setdefault(run["id"], {})
                for key, value in run.items():
                    if value in (None, {}, []) and base.get(key) not in (None, {}, []):
                        continue  # an empty value never overwrites what the other half sent
                    base[key] = value
    return list(runs.values())


def runs_of(data: Any) -> list[Any] | None:
    if _is_batch(data):
        return _merge([data])
    if isinstance(data, list) and data and all(_is_batch(b) for b in data):
        return _merge(data)
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        return _flatten(data["runs"])
    return _flatten(data) if isinstance(data, list) else None


def is_langsmith(data: Any) -> tuple[bool, str]:
    runs = runs_of(data)
    if runs and all(isinstance(r, dict) for r in runs) and {"run_type", "dotted_order"} <= set(runs[0]):
        return True, "runs with run_type and dotted_order" + (" (SDK post/patch batches)" if _is_batch(data) or (
            isinstance(data, list) and data and _is_batch(data[0])) else "")
    return False, "not a list of runs with `run_type` and `dotted_order`, nor `{post, patch}` batches (LangSmith)"


def _check(run: Any, i: int, file: str) -> dict[str, Any]:
    if not isinstance(run, dict):
        raise InputError(file, f"runs[{i}]", f"expected a run object, found {type(run).__name__}")
    rid = run.get("id") or f"runs[{i}]"
    for key in ("id", "trace_id", "dotted_order", "run_type", "name"):
        if not isinstance(run.get(key), str) or not run[key]:
            raise InputError(file, f"run {rid}: {key}", "missing or not a string")
    return run


def _metadata(run: dict[str, Any]) -> dict[str, Any]:
    return ((run.get("extra") or {}).get("metadata") or {}) if isinstance(run.get("extra"), dict) else {}


def _agent(run: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str:
    found = langgraph_agent(_metadata(run))
    if found:
        return found
    node = by_id.get(run.get("parent_run_id") or "")
    while node is not None:
        params = (node.get("extra") or {}).get("invocation_params") or {}
        if node.get("run_type") == "chain" and isinstance(params, dict) and "handoffs" in params:
            return str(node["name"])  # an OpenAI Agents SDK agent span
        node = by_id.get(node.get("parent_run_id") or "")
    node = run
    while node is not None:
        parent = by_id.get(node.get("parent_run_id") or "")
        if node is not run and node.get("run_type") == "chain" and parent is not None:
            return str(node["name"])
        node = parent
    return str(run["name"])


def _usage(run: dict[str, Any]) -> tuple[int, int, float]:
    """(prompt tokens, completion tokens, cost) of an llm run, from wherever the integration put them."""
    cost = float(run.get("total_cost") or 0.0)
    if run.get("prompt_tokens") or run.get("completion_tokens"):
        return int(run.get("prompt_tokens") or 0), int(run.get("completion_tokens") or 0), cost
    usage = _metadata(run).get("usage_metadata")
    found = run.get("outputs")
    outputs: dict[str, Any] = found if isinstance(found, dict) else {}
    if not usage and isinstance(outputs.get("generations"), list) and outputs["generations"]:
        first = outputs["generations"][0]
        first = first[0] if isinstance(first, list) and first else first
        message = first.get("message") if isinstance(first, dict) else None
        if isinstance(message, dict):
            usage = (message.get("kwargs") or message).get("usage_metadata")
    if not usage and isinstance(outputs.get("usage"), dict):
        usage = outputs["usage"]
    if isinstance(usage, dict):
        return (int(usage.get("input_tokens", usage.get("prompt_tokens", 0)) or 0),
                int(usage.get("output_tokens", usage.get("completion_tokens", 0)) or 0), cost)
    return 0, 0, cost


def _framework(members: list[dict[str, Any]], integration: str) -> str:
    """langgraph (LangGraph metadata), openai-agents (the Agents SDK processor), langchain (LangChain's tracer:
    serialised LangChain objects), else langsmith (`@traceable` / `wrap_openai` code)."""
    if integration == "langgraph" or any(langgraph_agent(_metadata(r)) for r in members):
        return "langgraph"
    if integration == "openai-agents-sdk":
        return "openai-agents"
    if any(isinstance(r.get("serialized"), dict) and r["serialized"].get("lc") for r in members) or \
            any(str(_metadata(r).get("ls_integration", "")).startswith("langchain") for r in members):
        return "langchain"
    return "langsmith"


def load(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    runs = runs_of(data)
    if runs is None:
        raise InputError(file, "<root>", "expected a list of LangSmith runs")
    runs = [_check(r, i, file) for i, r in enumerate(runs)]
    by_id = {r["id"]: r for r in runs}
    out = []
    for trace_id, members in group(runs, lambda r: r["trace_id"]).items():
        members.sort(key=lambda r: r["dotted_order"])
        root = next((r for r in members if not r.get("parent_run_id")), members[0])
        steps = []
        for r in members:
            extra = {"run_name": r["name"], "dotted_order": r["dotted_order"]}
            if r["run_type"] == "llm":
                message = read_message(r.get("outputs"))
                tokens = _usage(r)
                if any(tokens):
                    extra["usage"] = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "cost_usd": tokens[2]}
                steps.append(SourceStep(agent=_agent(r, by_id), kind="agent", content=message.text, source_id=r["id"],
                                        tool_calls=message.tool_calls, unread=not message.read,
                                        started_at=from_iso(r.get("start_time")), role="assistant", extra=extra))
            elif r["run_type"] == "tool":
                result = read_message(r.get("outputs"))
                steps.append(SourceStep(agent=_agent(r, by_id), kind="tool", content=result.text, unread=not result.read,
                                        source_id=r["id"], tool_calls=[tool_call(r["name"], r.get("inputs"))],
                                        started_at=from_iso(r.get("start_time")), extra=extra))
        meta = _metadata(root)
        error = root.get("error")
        start, end = from_iso(root.get("start_time")), from_iso(root.get("end_time"))
        usage = [_usage(r) for r in members if r["run_type"] == "llm"]
        integration = str(meta.get("ls_integration") or "")
        out.append(build_trajectory(
            file, "langsmith", steps,
            trace={"trace_id": trace_id, "root_run_id": root["id"], "session_id": root.get("session_id"),
                   "session_name": root.get("session_name")},
            framework=framework or _framework(members, integration),
            benchmark=benchmark or "imported-traces", task_id=trace_id,
            question=first_user_text(root.get("inputs")) or question_text(root.get("inputs")),
            final_answer=read_message(root.get("outputs")).text or None,
            verdict=None if not error else Verdict(success=False, details={"source": "langsmith root run error", "error": str(error)[:500]}),
            started_at=start, duration_s=seconds_between(start, end),
            prompt_tokens=sum(u[0] for u in usage) or int(root.get("prompt_tokens") or 0),
            completion_tokens=sum(u[1] for u in usage) or int(root.get("completion_tokens") or 0),
            cost_usd=sum(u[2] for u in usage) or float(root.get("total_cost") or 0.0),
        ))
    return out
