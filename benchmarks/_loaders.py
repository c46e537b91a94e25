"""Loaders of the math and question-answering benchmarks: GSM8K, MATH-500, HotpotQA, GAIA.

Each loader reads its published file format and returns every task in file order; `load_tasks`
does the shuffling, slicing and limiting. Nothing is downloaded: the files live under the shared
data dir (`ROOTSTEP_SHARED_DATA`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from rootstep.model import InputError, Task

from ._catalog import catalog
from ._registry import BenchmarkInfo, benchmark


def jsonl_objects(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, object, None) for each non-blank line holding a JSON object; (line number, None, why)
    for one that does not."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, None, f"not valid JSON: {exc.msg} (column {exc.colno})"
            continue
        if isinstance(row, dict):
            yield number, row, None
        else:
            yield number, None, f"expected a JSON object, found {type(row).__name__}"


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; `InputError` naming file and line otherwise."""
    with open(path, encoding="utf-8") as fh:
        for number, row, problem in jsonl_objects(fh):
            if row is None:
                raise InputError(str(path), f"line {number}", str(problem))
            yield number, row


def read_json_array(path: Path, of: str = "") -> list[Any]:
    """The JSON array in `path` (`of`: what it holds, for the error); `InputError` naming the file otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"line {exc.lineno}", f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise InputError(str(path), "(top level)", f"expected a JSON array{of}")
    return data


def require(row: dict[str, Any], field: str, path: Path, line: int | str, kind: type | tuple[type, ...] = str) -> Any:
    if field not in row:
        raise InputError(str(path), f"line {line}: {field}", "missing")
    if not isinstance(row[field], kind) or isinstance(row[field], bool):
        expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise InputError(str(path), f"line {line}: {field}", f"expected {expected}, found {type(row[field]).__name__}")
    return row[field]


GSM8K = catalog("gsm8k")


@benchmark(GSM8K)
def load_gsm8k(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """`{"question", "answer"}`; the final answer follows `#### `. task_id is `test-<0-based line index>`."""
    tasks = []
    for index, (line, row) in enumerate(read_jsonl(paths[0])):
        solution = require(row, "answer", paths[0], line)
        if "####" not in solution:
            raise InputError(str(paths[0]), f"line {line}: answer", "has no '#### <final answer>'")
        tasks.append(info.task(f"test-{index}", require(row, "question", paths[0], line),
                               solution.rsplit("####", 1)[1].strip(), {"solution": solution, "line": line}))
    return tasks


MATH500 = catalog("math500")


@benchmark(MATH500)
def load_math500(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """`{"problem", "solution", "answer", "subject", "level", "unique_id"}`; task_id is `unique_id`."""
    tasks = []
    for line, row in read_jsonl(paths[0]):
        tasks.append(info.task(require(row, "unique_id", paths[0], line), require(row, "problem", paths[0], line),
                               require(row, "answer", paths[0], line),
                               {k: row[k] for k in ("solution", "subject", "level") if k in row}))
    return tasks


HOTPOTQA = catalog("hotpotqa")


def _hotpot_rows(path: Path) -> Iterator[tuple[int | str, dict[str, Any]]]:
    if path.suffix == ".jsonl":
        yield from read_jsonl(path)
        return
    for index, row in enumerate(read_json_array(path, " of questions")):
        if not isinstance(row, dict):
            raise InputError(str(path), f"[{index}]", "expected a JSON object")
        yield f"[{index}]", row


@benchmark(HOTPOTQA)
def load_hotpotqa(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """The official JSON array (or JSONL) of `{"_id", "question", "answer", "context", "supporting_facts",
    "type", "level"}`; `context` is `[[title, [sentence, ...]], ...]` and becomes `metadata["paragraphs"]`
    (`[{"title", "sentences"}]`), which `rootstep.benchmarks.search` ranks. The prompt holds only the
    question: agents reach the paragraphs through the search tool."""
    tasks = []
    for where, row in _hotpot_rows(paths[0]):
        context = require(row, "context", paths[0], where, list)
        paragraphs = []
        for i, item in enumerate(context):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list)):
                raise InputError(str(paths[0]), f"line {where}: context[{i}]", "expected [title, [sentences]]")
            paragraphs.append({"title": item[0], "sentences": [str(s) for s in item[1]]})
        task_id = str(require(row, "_id", paths[0], where, (str, int)))  # 4 subset rows have integer ids
        tasks.append(info.task(task_id, require(row, "question", paths[0], where), require(row, "answer", paths[0], where), {
            "paragraphs": paragraphs, "supporting_facts": row.get("supporting_facts", []), "type": row.get("type"),
            "level": row.get("level")}))
    return tasks


GAIA = catalog("gaia")


@benchmark(GAIA)
def load_gaia(paths: list[Path], info: BenchmarkInfo) -> list[Task]:
    """`metadata.jsonl` rows `{"task_id", "Question", "Level", "Final answer", "file_name", "Annotator Metadata"}`.
    An attached file (`file_name`) is resolved next to metadata.jsonl into `metadata["file_path"]`;
    a missing attachment is an error. A `Final answer` of `?` (the hidden test split) gives
    `ground_truth=None`."""
    tasks = []
    folder = paths[0].parent
    for line, row in read_jsonl(paths[0]):
        answer = row.get("Final answer")
        meta: dict[str, Any] = {"level": row.get("Level")}
        file_name = row.get("file_name") or ""
        if file_name:
            file_path = folder / file_name
            if not file_path.exists():
                raise InputError(str(paths[0]), f"line {line}: file_name", f"attachment {file_path} does not exist")
            meta |= {"file_name": file_name, "file_path": str(file_path)}
        if isinstance(row.get("Annotator Metadata"), dict):
            meta["annotator_metadata"] = row["Annotator Metadata"]
        tasks.append(info.task(require(row, "task_id", paths[0], line), require(row, "Question", paths[0], line),
                               None if answer in (None, "?") else str(answer), meta))
    return tasks
