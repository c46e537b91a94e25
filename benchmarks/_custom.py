"""User benchmarks: a JSONL file plus the name of a verifier (`rootstep benchmark add`).

One JSON object per line:

| field | type | needed for |
|---|---|---|
| `prompt` | non-empty string | always |
| `task_id` | string or integer, unique | optional (default `line-<n>`) |
| `ground_truth` (or `answer`) | string or number | numeric, math, qa, exact, gaia |
| `tests` | non-empty list of assert statements | code_tests (MBPP style), or |
| `test` | a pytest module that imports from `solution` | code_tests (KodCode style) |
| `entry_point`, `test_setup` | strings | code_tests, optional |
| `metadata` | object | optional, copied into `Task.metadata` |

`add_benchmark` validates every line before anything is written, then copies the file and a
manifest (`<name>.json`) into the user registry dir atomically (temporary file + rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rootstep.model import Task, TaskKind

from ._errors import BenchmarkError, ValidationError
from ._loaders import jsonl_objects
from ._numeric import parse_number
from ._registry import BENCHMARKS, BenchmarkInfo, Loader, verifier_info
from ._settings import user_registry_dir

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_KIND_BY_VERIFIER: dict[str, TaskKind] = {
    "code_tests": "coding", "numeric": "math", "math": "math", "qa": "qa", "exact": "qa", "gaia": "agentic",
}
_KNOWN_FIELDS = {"prompt", "task_id", "ground_truth", "answer", "tests", "test", "entry_point", "test_setup", "metadata"}
MAX_PROBLEMS = 20


def _row_problems(row: dict[str, Any], verifier: str) -> list[tuple[str, str]]:
    """(field, problem) for one parsed line."""
    problems = []
    unknown = sorted(set(row) - _KNOWN_FIELDS)
    if unknown:
        problems.append((unknown[0], f"unknown field (allowed: {', '.join(sorted(_KNOWN_FIELDS))}; put extras in metadata)"))
    if not isinstance(row.get("prompt"), str) or not row.get("prompt", "").strip():
        problems.append(("prompt", "missing or not a non-empty string"))
    if "task_id" in row and (isinstance(row["task_id"], bool) or not isinstance(row["task_id"], (str, int))):
        problems.append(("task_id", "must be a string or an integer"))
    if "metadata" in row and not isinstance(row["metadata"], dict):
        problems.append(("metadata", "must be a JSON object"))
    truth = row.get("ground_truth", row.get("answer"))
    if verifier == "code_tests":
        tests, test = row.get("tests"), row.get("test")
        if tests is None and test is None:
            problems.append(("tests", "code_tests needs `tests` (list of asserts) or `test` (pytest module)"))
        if tests is not None and (not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests)):
            problems.append(("tests", "must be a non-empty list of strings"))
        if test is not None and (not isinstance(test, str) or not test.strip()):
            problems.append(("test", "must be a non-empty string"))
        for field in ("entry_point", "test_setup"):
            if field in row and not isinstance(row[field], str):
                problems.append((field, "must be a string"))
        for i, t in enumerate(tests if isinstance(tests, list) else []):
            if isinstance(t, str):
                try:
                    compile(t, f"tests[{i}]", "exec")
                except SyntaxError as exc:
                    problems.append((f"tests[{i}]", f"not valid Python: {exc.msg}"))
    else:
        if truth is None or isinstance(truth, bool) or not isinstance(truth, (str, int, float)) or str(truth).strip() == "":
            problems.append(("ground_truth", f"verifier {verifier!r} needs a ground_truth (string or number)"))
        elif verifier == "numeric" and parse_number(str(truth)) is None:
            problems.append(("ground_truth", f"{truth!r} holds no number (verifier numeric)"))
    return problems


def _task_from_row(row: dict[str, Any], line: int, info: BenchmarkInfo) -> Task:
    truth = row.get("ground_truth", row.get("answer"))
    meta: dict[str, Any] = dict(row.get("metadata") or {})
    if info.verifier == "code_tests":
        if row.get("tests") is not None:
            meta |= {"harness": "asserts", "tests": row["tests"], "test_setup": row.get("test_setup", "")}
        else:
            meta |= {"harness": "pytest", "test": row["test"]}
        if row.get("entry_point"):
            meta["entry_point"] = row["entry_point"]
    return Task(
        benchmark=info.name,
        task_id=str(row.get("task_id", f"line-{line}")),
        prompt=row["prompt"],
        ground_truth=None if truth is None else str(truth),
        verifier=info.verifier,
        kind=info.kind,
        metadata=meta,
    )


def validate_file(path: Path, verifier: str) -> list[dict[str, Any]]:
    """The rows of `path`, or `ValidationError` listing every problem as `file: line N: field: problem`."""
    verifier_info(verifier)  # unknown verifier -> BenchmarkError
    if not path.is_file():
        raise BenchmarkError(f"{path}: no such file")
    problems: list[str] = []
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        try:
            lines = list(fh)
        except UnicodeDecodeError as exc:
            raise ValidationError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    for number, row, problem in jsonl_objects(lines):
        if row is None:
            problems.append(f"{path}: line {number}: {problem}")
            continue
        for field, problem in _row_problems(row, verifier):
            problems.append(f"{path}: line {number}: {field}: {problem}")
        task_id = str(row.get("task_id", f"line-{number}"))
        if task_id in seen:
            problems.append(f"{path}: line {number}: task_id: {task_id!r} repeats line {seen[task_id]}")
        seen.setdefault(task_id, number)
        rows.append(row | {"__line__": number})
    if not rows and not problems:
        problems.append(f"{path}: no tasks (the file is empty)")
    if problems:
        raise ValidationError(problems[:MAX_PROBLEMS], more=max(0, len(problems) - MAX_PROBLEMS))
    return rows


def _atomic_write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_benchmark(
    name: str,
    path: str | Path,
    verifier: str,
    *,
    licence: str = "unknown (user-supplied)",
    kind: TaskKind | None = None,
    force: bool = False,
    registry: Path | None = None,
) -> tuple[BenchmarkInfo, int]:
    """Validate `path` and copy it into the user registry as benchmark `name`; (info, task count)."""
    path = Path(path)
    if not _NAME.match(name):
        raise BenchmarkError(f"benchmark name {name!r}: use 1-64 letters, digits, '.', '_', '+', '-'")
    if name in BENCHMARKS:
        raise BenchmarkError(f"benchmark name {name!r} is a built-in benchmark; choose another name")
    folder = registry or user_registry_dir()
    if (folder / f"{name}.json").exists() and not force:
        raise BenchmarkError(f"benchmark {name!r} already exists in {folder}; pass --force to replace it")
    rows = validate_file(path, verifier)
    data = path.read_bytes()
    info = BenchmarkInfo(
        name=name,
        title=f"user benchmark from {path.name}",
        kind=kind or _KIND_BY_VERIFIER.get(verifier, "qa"),
        verifier=verifier,
        licence=licence,
        source=str(path.resolve()),
        files=(str(folder / f"{name}.jsonl"),),
        builtin=False,
    )
    manifest = info.model_dump() | {
        "added_at": datetime.now(timezone.utc).isoformat(),
        "sha256": hashlib.sha256(data).hexdigest(),
        "tasks": len(rows),
    }
    _atomic_write(folder / f"{name}.jsonl", data)
    _atomic_write(folder / f"{name}.json", json.dumps(manifest, indent=1).encode())
    return info, len(rows)


def _load_user(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    rows = validate_file(paths[0], info.verifier)
    return [_task_from_row(row, row.pop("__line__"), info) for row in rows]


def user_benchmarks(registry: Path | None = None) -> list[tuple[BenchmarkInfo, Loader]]:
    folder = registry or user_registry_dir()
    if not folder.is_dir():
        return []
    found: list[tuple[BenchmarkInfo, Loader]] = []
    for manifest in sorted(folder.glob("*.json")):
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            info = BenchmarkInfo.model_validate({k: data[k] for k in BenchmarkInfo.model_fields if k in data})
        except (OSError, ValueError) as exc:
            raise BenchmarkError(f"{manifest}: unreadable benchmark manifest: {exc}") from None
        found.append((info, _load_user))
    return found


def user_benchmark(name: str) -> tuple[BenchmarkInfo, Loader] | None:
    return next(((info, load) for info, load in user_benchmarks() if info.name == name), None)
