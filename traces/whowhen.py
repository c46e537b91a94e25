"""Import and export of the Who&When format, and of plain traces.

Who&When (Zhang, Yin et al., ICML 2025) has two subsets:

* Algorithm-Generated (CaptainAgent / AG2 group chats): history entries `{content, name, role}`;
  `name` is the acting agent, `role` the chat role (`assistant` / `user`).
* Hand-Crafted (Magentic-One): history entries `{content, role}`; `role` holds the agent label, with
  the orchestrator's sub-turns as `Orchestrator (thought)`, `Orchestrator (-> WebSurfer)`, ...;
  the agent is the label without its parenthesised suffix.

Labels are `mistake_agent`, `mistake_step` (a 0-based index into `history`, stored as a STRING) and
`mistake_reason`; they become `Annotation(method="human", verified=True)`.

A plain trace is `{"history" | "conversation": [...], "question", "ground_truth"}`, optionally with the
same label fields.

Everything the model does not hold (key order, `level` with its original type, `system_prompt`,
extra keys, JSON formatting) is kept in `Trajectory.metadata["whowhen"]` so the exporter writes back
the same JSON: the round trip is lossless.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._import import ImportReport
from rootstep.model import Annotation, Evidence, InputError, Step, StepKind, Trajectory, Verdict
from rootstep.warehouse import Warehouse, annotation_from_row, write_text

AG_FRAMEWORK, AG_BENCHMARK, AG_DIR = "captainagent", "whowhen-algorithm-generated", "Algorithm-Generated"
HC_FRAMEWORK, HC_BENCHMARK, HC_DIR = "magentic-one", "whowhen-hand-crafted", "Hand-Crafted"
PLAIN_FRAMEWORK, PLAIN_BENCHMARK = "unknown", "plain-traces"
ANNOTATOR = "whowhen"

_LABEL_KEYS = ("mistake_agent", "mistake_step", "mistake_reason")
_MODELLED_KEYS = {"history", "conversation", "question", "ground_truth", "question_ID", *_LABEL_KEYS}
_ROLE_SUFFIX = re.compile(r"\s*\([^()]*\)\s*$")
_TOOL_AGENTS = re.compile(r"^(computer[_ ]?terminal|code[_ ]?executor|executor|user[_ ]?proxy)$", re.IGNORECASE)
_HUMAN_AGENTS = {"human", "user"}


# ------------------------------------------------------------------------------------ parsing


def _agent_from_role(role: str) -> str:
    """`Orchestrator (-> WebSurfer)` -> `Orchestrator`; labels without a suffix stay as they are."""
    return _ROLE_SUFFIX.sub("", role) or role


def _step_kind(agent: str, entry: dict[str, Any], subset: str) -> StepKind:
    if _TOOL_AGENTS.match(agent):
        return "tool"
    if agent.lower() in _HUMAN_AGENTS and not (subset == "algorithm-generated" and entry.get("name")):
        return "human"
    return "agent"


def _detect_subset(record: dict[str, Any], history: list[Any]) -> str:
    if "question_ID" in record and "is_correct" in record or "system_prompt" in record:
        return "algorithm-generated"
    if "question_ID" in record and "is_corrected" in record:
        return "hand-crafted"
    return "plain"


def _parse_step_index(value: Any, file: str, n_steps: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(file, "mistake_step", f"{value!r} is not an integer step index")
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise InputError(file, "mistake_step", f"{value!r} is not an integer step index")
    step = int(text)
    if not 0 <= step < n_steps:
        raise InputError(file, "mistake_step", f"{step} is outside the history (valid steps are 0..{n_steps - 1})")
    return step


def _json_format(raw: str, record: dict[str, Any]) -> dict[str, Any]:
    """How the file was formatted, so the exporter can write the same bytes where it was machine-made."""
    indent = 4
    match = re.match(r"\{\n( +)\"", raw)
    if match:
        indent = len(match.group(1))
    has_non_ascii = any(ord(ch) > 127 for ch in raw)
    return {"indent": indent, "ensure_ascii": not has_non_ascii, "trailing_newline": raw.endswith("\n")}


def parse_record(
    record: Any,
    file: str,
    framework: str | None = None,
    benchmark: str | None = None,
    raw: str | None = None,
) -> tuple[Trajectory, Annotation | None]:
    """One Who&When record (or plain trace) -> its trajectory and, when labelled, its human label.

    Raises `InputError` naming `file`, the field and the problem.
    """
    if not isinstance(record, dict):
        raise InputError(file, "<root>", f"expected a JSON object, found {type(record).__name__}")
    history_key = "history" if "history" in record else "conversation" if "conversation" in record else None
    if history_key is None:
        raise InputError(file, "history", "missing: expected a list of {content, name|role} entries")
    history = record[history_key]
    if not isinstance(history, list):
        raise InputError(file, history_key, f"expected a list of entries, found {type(history).__name__}")
    if not history:
        raise InputError(file, history_key, "is empty: a trajectory needs at least one step")
    subset = _detect_subset(record, history)

    steps: list[Step] = []
    entry_keys: list[str] | None = None
    for i, entry in enumerate(history):
        where = f"{history_key}[{i}]"
        if not isinstance(entry, dict):
            raise InputError(file, where, f"expected an object, found {type(entry).__name__}")
        if "content" not in entry:
            raise InputError(file, f"{where}.content", "missing")
        content = entry["content"]
        if not isinstance(content, str):
            raise InputError(file, f"{where}.content", f"expected a string, found {type(content).__name__}")
        name, role = entry.get("name"), entry.get("role")
        for key, value in (("name", name), ("role", role)):
            if value is not None and not isinstance(value, str):
                raise InputError(file, f"{where}.{key}", f"expected a string, found {type(value).__name__}")
        if name:
            agent = name
        elif role:
            agent = _agent_from_role(role)
        else:
            raise InputError(file, f"{where}.name", "missing: an entry needs `name` or `role` to name its agent")
        keys = list(entry.keys())
        entry_keys = keys if entry_keys is None else entry_keys
        metadata: dict[str, Any] = {}
        if keys != entry_keys:
            metadata["keys"] = keys
        extra = {k: v for k, v in entry.items() if k not in ("content", "name", "role")}
        if extra:
            metadata["extra"] = extra
        if "name" in entry and name is None:
            metadata["null_name"] = True
        steps.append(
            Step(
                index=i,
                agent=agent,
                kind=_step_kind(agent, entry, subset),
                content=content,
                role=role,
                metadata=metadata,
            )
        )

    for key in ("question", "ground_truth"):
        if key in record and record[key] is not None and not isinstance(record[key], (str, int, float)):
            raise InputError(file, key, f"expected a string, found {type(record[key]).__name__}")

    label_present = [k for k in ("mistake_agent", "mistake_step") if k in record]
    if len(label_present) == 1:
        missing = ({"mistake_agent", "mistake_step"} - set(label_present)).pop()
        raise InputError(file, missing, "missing: a label needs both mistake_agent and mistake_step")

    if subset == "algorithm-generated":
        default_framework, default_benchmark = AG_FRAMEWORK, AG_BENCHMARK
    elif subset == "hand-crafted":
        default_framework, default_benchmark = HC_FRAMEWORK, HC_BENCHMARK
    else:
        default_framework, default_benchmark = PLAIN_FRAMEWORK, PLAIN_BENCHMARK

    extra = {k: v for k, v in record.items() if k not in _MODELLED_KEYS}
    for key in ("question", "ground_truth", "question_ID"):
        if key in record and not isinstance(record[key], str):
            extra[key] = record[key]  # keep the original type (a number, null) for the exporter
    meta: dict[str, Any] = {
        "subset": subset,
        "file": os.path.basename(file),
        "history_key": history_key,
        "key_order": list(record.keys()),
        "entry_keys": entry_keys,
        "extra": extra,
    }
    if "mistake_step" in record:
        meta["mistake_step_type"] = type(record["mistake_step"]).__name__
    if raw is not None:
        meta["json"] = _json_format(raw, record)

    success: bool | None = None
    for key in ("is_correct", "is_corrected"):
        if isinstance(record.get(key), bool):
            success = record[key]
    if success is None and label_present:
        success = False  # a labelled failure log

    task_id = record.get("question_ID")
    try:
        trajectory = Trajectory(
            framework=framework or default_framework,
            benchmark=benchmark or default_benchmark,
            task_id=str(task_id) if task_id is not None else os.path.splitext(os.path.basename(file))[0],
            question="" if record.get("question") is None else str(record["question"]),
            ground_truth=None if record.get("ground_truth") is None else str(record["ground_truth"]),
            steps=steps,
            verdict=None if success is None else Verdict(success=success, score=float(success), details={"source": "whowhen"}),
            source=file,
            metadata={"whowhen": meta},
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(file, ".".join(str(p) for p in first["loc"]) or "<root>", first["msg"]) from None

    if not label_present:
        return trajectory, None

    mistake_agent = record["mistake_agent"]
    if not isinstance(mistake_agent, str) or not mistake_agent.strip():
        raise InputError(file, "mistake_agent", f"{mistake_agent!r} is not an agent name")
    step = _parse_step_index(record["mistake_step"], file, len(steps))
    known = set(trajectory.agents) | {s.role for s in steps if s.role} | set(record.get("system_prompt") or {})
    if mistake_agent not in known:
        agents = ", ".join(sorted(trajectory.agents))
        raise InputError(file, "mistake_agent", f"{mistake_agent!r} is not an agent of this trajectory (agents: {agents})")
    notes = []
    if steps[step].agent != mistake_agent:
        notes.append(
            f"label agent {mistake_agent!r} differs from the agent of step {step} ({steps[step].agent!r}); kept as labelled"
        )
    reason = record.get("mistake_reason")
    annotation = Annotation(
        run_id=trajectory.id,
        framework=trajectory.framework,
        benchmark=trajectory.benchmark,
        method="human",
        agent=mistake_agent,
        step=step,
        verified=True,
        annotator=ANNOTATOR,
        evidence=Evidence(reason=None if reason is None else str(reason), notes=notes),
    )
    return trajectory, annotation


def is_whowhen(data: Any) -> tuple[bool, str]:
    """A Who&When record or a plain trace: an object whose `history` (or `conversation`) is a list of
    `{content, name | role}` entries."""
    if not isinstance(data, dict):
        return False, "not a JSON object with a `history`"
    key = "history" if "history" in data else "conversation" if "conversation" in data else None
    if key is None:
        return False, "no `history` or `conversation` list"
    entries = data[key]
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "content" in e and ("role" in e or "name" in e)
                                                for e in entries):
        return False, f"`{key}` is not a list of {{content, name | role}} entries"
    return True, ""


def load_file(path: str | Path, framework: str | None = None, benchmark: str | None = None) -> tuple[Trajectory, Annotation | None]:
    """Read and parse one JSON file; every problem is an `InputError` naming the file and field."""
    file = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(file, "<file>", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(file, "<file>", exc.strerror or str(exc)) from None
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(file, "<json>", f"malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    return parse_record(record, file, framework=framework, benchmark=benchmark, raw=raw)


def import_paths(
    paths: Sequence[str | Path],
    warehouse: Warehouse,
    skip_invalid: bool = False,
    framework: str | None = None,
    benchmark: str | None = None,
    progress: Any = None,
) -> ImportReport:
    """Who&When files (and plain traces) under `paths` into `warehouse`: `import_traces` with the `whowhen`
    format. Every file is validated first; without `skip_invalid` the first invalid one raises and nothing is
    written, with it the valid files are imported and the invalid ones listed. Importing again is a no-op."""
    from . import import_traces

    return import_traces(paths, warehouse, format="whowhen", framework=framework, benchmark=benchmark,
                         skip_invalid=skip_invalid, progress=progress)


# ------------------------------------------------------------------------------------ export


def to_record(trajectory: Trajectory, label: Annotation | None) -> dict[str, Any]:
    """A trajectory and its label as a Who&When record, in the original key order where known."""
    meta = trajectory.metadata.get("whowhen", {})
    extra: dict[str, Any] = meta.get("extra", {})
    history_key = meta.get("history_key", "history")
    entry_keys = meta.get("entry_keys") or (["content", "name", "role"])
    history = []
    for step in trajectory.steps:
        entry: dict[str, Any] = {"content": step.content, "name": step.agent, "role": step.role}
        if step.metadata.get("null_name"):
            entry["name"] = None
        entry.update(step.metadata.get("extra", {}))
        keys = step.metadata.get("keys", entry_keys)
        history.append({k: entry[k] for k in keys if k in entry})
    values: dict[str, Any] = {
        history_key: history,
        "question": trajectory.question,
        "ground_truth": trajectory.ground_truth,
        "question_ID": trajectory.task_id,
    }
    if label is not None and label.status == "labelled":
        step_type = meta.get("mistake_step_type", "str")
        values["mistake_agent"] = label.agent
        values["mistake_step"] = label.step if step_type == "int" else str(label.step)
        values["mistake_reason"] = label.evidence.reason
    values.update(extra)
    order = list(meta.get("key_order") or [history_key, "question", "ground_truth"])
    order += [k for k in values if k not in order and (k in _LABEL_KEYS or k in extra)]
    return {k: values[k] for k in order if k in values}


def dumps_record(record: dict[str, Any], trajectory: Trajectory) -> str:
    fmt = trajectory.metadata.get("whowhen", {}).get("json", {"indent": 4, "ensure_ascii": False, "trailing_newline": True})
    text = json.dumps(record, indent=fmt["indent"], ensure_ascii=fmt["ensure_ascii"])
    return text + ("\n" if fmt["trailing_newline"] else "")


def export_whowhen(warehouse: Warehouse, out: str | Path, where: str = "true", params: Sequence[Any] | None = None) -> int:
    """Write each selected run with its latest verified label as `<out>/<subset>/<file>.json`."""
    out = Path(out)
    labels = {r["run_id"]: annotation_from_row(r) for r in warehouse.rows("SELECT * FROM labels")}
    n = 0
    for run_id, trajectory in warehouse.trajectories(where, params):
        meta = trajectory.metadata.get("whowhen", {})
        folder = {"algorithm-generated": AG_DIR, "hand-crafted": HC_DIR}.get(meta.get("subset"), trajectory.benchmark)
        name = meta.get("file") or f"{run_id}.json"
        label = labels.get(run_id)
        write_text(out / folder / name, dumps_record(to_record(trajectory, label), trajectory))
        n += 1
    return n
