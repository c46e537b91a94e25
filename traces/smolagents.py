"""smolagents memory: `agent.memory.get_full_steps()` as JSON, with the managed agents' memories nested.

Accepted shapes: the bare list of one agent's steps, or `{"name", "task", "steps", "managed_agents": [{"name",
"steps", "managed_agents": [...]}, ...]}` (how a manager and its managed agents are dumped together).

Steps of every agent are merged in `timing.start_time` order (a managed agent's steps fall inside the
manager's step that called it). The root's `TaskStep` is a human step; a `PlanningStep` or `ActionStep`
is an agent step (model output, tool calls, observations and error); system prompts and the managed
agents' own task steps (the manager's call already holds them) are left out. smolagents has no step
ids: the source id is `<agent>/step<step_number>`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rootstep.model import InputError, Trajectory
from ._build import SourceStep, build_trajectory, text_of, tool_call


def _agent_tree(data: Any) -> dict[str, Any] | None:
    if isinstance(data, list):
        return {"name": "agent", "steps": data, "managed_agents": []}
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        return data
    return None


def is_smolagents(data: Any) -> tuple[bool, str]:
    tree = _agent_tree(data)
    steps = tree["steps"] if tree else []
    if steps and all(isinstance(s, dict) for s in steps) and any("step_number" in s and "timing" in s for s in steps):
        return True, "memory steps with step_number and timing"
    return False, "no smolagents memory steps (objects with step_number and timing, as get_full_steps() writes)"


def _time(step: dict[str, Any]) -> float:
    timing = step.get("timing") or {}
    value = timing.get("start_time") if isinstance(timing, dict) else None
    return float(value) if isinstance(value, (int, float)) else float("inf")


def _collect(tree: dict[str, Any], root: bool, file: str, out: list[tuple[float, int, SourceStep]], where: str) -> None:
    name = str(tree.get("name") or "agent")
    if not isinstance(tree.get("steps"), list):
        raise InputError(file, f"{where}.steps", "missing or not a list")
    for i, step in enumerate(tree["steps"]):
        path = f"{where}.steps[{i}]"
        if not isinstance(step, dict):
            raise InputError(file, path, f"expected a step object, found {type(step).__name__}")
        started = _time(step)
        when = None if started == float("inf") else datetime.fromtimestamp(started, timezone.utc)
        if "task" in step and "step_number" not in step:
            if root:
                out.append((started if started != float("inf") else float("-inf"), len(out),
                            SourceStep(agent="user", kind="human", content=text_of(step["task"]), source_id=f"{name}/task", role="user")))
            continue
        if "plan" in step:
            out.append((started, len(out), SourceStep(agent=name, kind="agent", content=text_of(step["plan"]),
                                                      source_id=f"{name}/plan{i}", started_at=when, role="planning")))
            continue
        if "step_number" not in step:
            continue  # system prompt, final answer record
        if not isinstance(step["step_number"], int):
            raise InputError(file, f"{path}.step_number", f"{step['step_number']!r} is not an integer")
        output = step.get("model_output")
        if output is None and isinstance(step.get("model_output_message"), dict):
            output = step["model_output_message"].get("content")
        calls = []
        for c_i, call in enumerate(step.get("tool_calls") or []):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or "name" not in function:
                raise InputError(file, f"{path}.tool_calls[{c_i}].function.name", "missing")
            calls.append(tool_call(str(function["name"]), function.get("arguments"), call.get("id")))
        observation = step.get("observations")
        error = step.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            observation = ((observation or "") + f"\nError: {message}").strip()
        out.append((started, len(out), SourceStep(
            agent=name, kind="agent", content=text_of(output), source_id=f"{name}/step{step['step_number']}",
            tool_calls=calls, observation=None if observation is None else str(observation), started_at=when,
            role="assistant", extra={"step_number": step["step_number"], "is_final_answer": bool(step.get("is_final_answer"))},
        )))
    for m_i, managed in enumerate(tree.get("managed_agents") or []):
        if not isinstance(managed, dict):
            raise InputError(file, f"{where}.managed_agents[{m_i}]", "expected an object with name and steps")
        _collect(managed, False, file, out, f"{where}.managed_agents[{m_i}]")


def load(data: Any, file: str, framework: str | None = None, benchmark: str | None = None) -> list[Trajectory]:
    tree = _agent_tree(data)
    if tree is None:
        raise InputError(file, "steps", "missing: expected get_full_steps() output")
    collected: list[tuple[float, int, SourceStep]] = []
    _collect(tree, True, file, collected, "memory" if isinstance(data, dict) else "<root>")
    steps = [s for _, _, s in sorted(collected, key=lambda item: (item[0], item[1]))]
    root_steps = tree["steps"]
    task = tree.get("task") or next((s.get("task") for s in root_steps if isinstance(s, dict) and "task" in s), "")
    final = next((s for s in reversed(root_steps) if isinstance(s, dict) and s.get("is_final_answer")), None)
    answer = None if final is None else text_of(final.get("action_output") if final.get("action_output") is not None
                                                else final.get("observations")) or None
    name = str(tree.get("name") or "agent")
    tokens = [s.get("token_usage") or {} for s in root_steps if isinstance(s, dict)]
    return [build_trajectory(
        file, "smolagents", steps, trace={"trace_id": None, "root_agent": name},
        framework=framework or "smolagents", benchmark=benchmark or "imported-traces",
        task_id=Path(file).stem, question=text_of(task),
        final_answer=answer,
        prompt_tokens=sum(int(t.get("input_tokens") or 0) for t in tokens),
        completion_tokens=sum(int(t.get("output_tokens") or 0) for t in tokens),
    )]
